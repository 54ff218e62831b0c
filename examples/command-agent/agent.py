#!/usr/bin/env python3
"""An order-status agent that `belay eval` runs as a command (suite.yaml: agent: {command: [python3, agent.py]}).

Only the standard library, and only what belay gives every command agent:
  stdin            the scenario's input (also in $BELAY_INPUT)
  OPENAI_BASE_URL  this run's own base URL: every call made to it is a turn of the run
  OPENAI_API_KEY   a placeholder key (belay holds the providers' keys)
  BELAY_MODEL      the suite's model alias
  BELAY_WORLD      a JSON file: the scenario's world; the agent records its lookups there for the check
The answer goes to stdout, the only stream belay reads. Exit 0 when answered, 1 when a model call failed:
belay refused it (turn cap, budget, deadline) or gave up on the providers after its own retries and
fallbacks. Either way the body says why, and the call is not worth retrying (x-should-retry: false).
"""
import json
import os
import sys
import urllib.error
import urllib.request

TOOLS = [{
    "type": "function",
    "function": {
        "name": "lookup_order",
        "description": "Look an order up by its id.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
    },
}]


def chat(messages):
    body = {"model": os.environ["BELAY_MODEL"], "messages": messages, "tools": TOOLS, "max_tokens": 256}
    req = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        return json.load(resp)["choices"][0]["message"]


def main():
    world_path = os.environ["BELAY_WORLD"]
    world = {}
    if os.path.exists(world_path):  # written only when the scenario has a world
        with open(world_path) as f:
            world = json.load(f)
    orders = world.get("orders", {})
    world["looked_up"] = []
    messages = [
        {"role": "system", "content": "You answer questions about orders. Use lookup_order."},
        {"role": "user", "content": sys.stdin.read()},
    ]
    try:
        while True:  # belay's turn cap ends a model that never concludes
            msg = chat(messages)
            messages.append(msg)
            calls = msg.get("tool_calls") or []
            if not calls:
                print(msg.get("content") or "")
                return 0
            for call in calls:
                order_id = json.loads(call["function"]["arguments"]).get("order_id", "")
                world["looked_up"].append(order_id)
                result = orders.get(order_id, {"error": "order not found"})
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": json.dumps(result)})
    except urllib.error.HTTPError as e:
        # A run that exits non-zero quotes the last lines of its stderr in the report: say why there.
        print(f"model call failed: {e.code} {e.read().decode()}", file=sys.stderr)
        return 1
    finally:
        with open(world_path, "w") as f:
            json.dump(world, f)


if __name__ == "__main__":
    sys.exit(main())

package openai

import (
	"bytes"

	"github.com/belay-run/belay/dialect"
)

// perMessageTokens is the overhead OpenAI's cookbook counts per message
// ("How to count tokens with tiktoken": 3 tokens per message for current
// models, plus 3 to prime the reply).
const perMessageTokens = 3

// settings are the top-level request members that are not prompt:
// sampling, limits, output and stream options, and metadata (names from
// OpenAI's API reference, "Create chat completion"). Every other member
// counts toward the prompt estimate.
var settings = map[string]bool{
	"model": true, "stream": true, "stream_options": true, "temperature": true, "top_p": true, "n": true,
	"max_tokens": true, "max_completion_tokens": true, "seed": true, "stop": true, "presence_penalty": true,
	"frequency_penalty": true, "logit_bias": true, "logprobs": true, "top_logprobs": true, "user": true,
	"safety_identifier": true, "prompt_cache_key": true, "prompt_cache_retention": true, "store": true,
	"metadata": true, "parallel_tool_calls": true, "tool_choice": true, "function_call": true,
	"service_tier": true, "reasoning_effort": true, "verbosity": true, "modalities": true, "audio": true,
	"web_search_options": true,
}

// EstimatePromptTokens estimates the prompt tokens of r for a budget
// reservation, from r.Raw, the body as sent (ParseRequest keeps it; a
// Request made otherwise must hold valid JSON there):
// ceil(chars/4) (dialect.EstimateTokens) over
//   - messages: text content and text parts, names, refusals, and the names
//     and arguments of tool calls and of the deprecated function_call;
//   - tools and the deprecated functions: names, descriptions and
//     parameters, a schema counted as its JSON without insignificant
//     whitespace (however the client formatted it);
//   - prediction content, as text;
//   - every other prompt part, by its JSON size: a top-level member that is
//     not a setting (see settings; response_format's schema, say), a
//     message member, content part or tool of a kind this package does not
//     know. A part belay does not know counts by its size, never as zero;
//
// plus 3 tokens per message and 3 for the reply primer, plus a per-part
// upper bound for images, audio and files (see addPart). The body is not
// decoded again: values are measured where they lie (dialect.PromptSize).
// It is an estimate, not a tokenizer count; it is never below 1.
func EstimatePromptTokens(r *Request) int64 {
	var s dialect.PromptSize
	var messages int64
	_ = dialect.EachMemberOfValid(r.Raw, func(name, value []byte) {
		switch string(name) {
		case "messages":
			_ = dialect.EachElementOfValid(value, func(m []byte) {
				messages++
				addMessage(&s, m)
			})
		case "tools":
			_ = dialect.EachElementOfValid(value, func(t []byte) { addTool(&s, t) })
		case "functions":
			_ = dialect.EachElementOfValid(value, func(f []byte) { addFunction(&s, f) })
		case "prediction":
			addPrediction(&s, value)
		default:
			if !settings[string(name)] {
				s.AddJSON(value)
			}
		}
	})
	return max(s.Tokens()+perMessageTokens*messages+perMessageTokens, 1)
}

// addMessage adds a message's content (see addContent), its name and
// refusal, its tool calls and deprecated function_call, and any other
// member by its JSON size. Its role and tool_call_id are in
// perMessageTokens.
func addMessage(s *dialect.PromptSize, m []byte) {
	_ = dialect.EachMemberOfValid(m, func(name, value []byte) {
		switch string(name) {
		case "role", "tool_call_id":
		case "content":
			addContent(s, value)
		case "tool_calls":
			_ = dialect.EachElementOfValid(value, func(c []byte) { addToolCall(s, c) })
		case "function_call":
			addMembers(s, value) // name and arguments
		default:
			s.AddJSON(value) // name, refusal (text), ...
		}
	})
}

// addContent adds a content: a string as text, an array part by part (see
// addPart); null adds nothing.
func addContent(s *dialect.PromptSize, c []byte) {
	if dialect.EachElementOfValid(c, func(p []byte) { addPart(s, p) }) != nil {
		s.AddJSON(c)
	}
}

// addPart adds a content part: a text or refusal part by its text; an
// image as dialect.OpenAIImageTokens (dialect.OpenAILowDetailImageTokens
// with detail "low"); audio and files from their data size (see
// dialect.EstimateAudioTokens and dialect.EstimateDocumentTokens, a file
// sent by id as one page); a part of another type by its JSON size.
func addPart(s *dialect.PromptSize, p []byte) {
	var typ, text, refusal, image, audio, file []byte
	_ = dialect.EachMemberOfValid(p, func(name, value []byte) {
		switch string(name) {
		case "type":
			typ = value
		case "text":
			text = value
		case "refusal":
			refusal = value
		case "image_url":
			image = value
		case "input_audio":
			audio = value
		case "file":
			file = value
		}
	})
	switch string(typ) {
	case `"text"`:
		s.AddText(text)
	case `"refusal"`:
		s.AddText(refusal)
	case `"image_url"`:
		addImage(s, member(image, "detail"))
	case `"input_audio"`:
		s.AddMedia(dialect.EstimateAudioTokens(int64(dialect.StringLen(member(audio, "data")))))
	case `"file"`:
		s.AddMedia(dialect.EstimateDocumentTokens(dataURLLen(member(file, "file_data"))))
	default:
		s.AddJSON(p)
	}
}

// addImage adds an image of detail (its JSON value, nil when unset):
// dialect.OpenAILowDetailImageTokens for "low", else
// dialect.OpenAIImageTokens.
func addImage(s *dialect.PromptSize, detail []byte) {
	if string(detail) == `"low"` {
		s.AddMedia(dialect.OpenAILowDetailImageTokens)
	} else {
		s.AddMedia(dialect.OpenAIImageTokens)
	}
}

// dataURLLen returns the length of the data of the JSON string value, a
// data: URL ("data:MIME;base64,DATA") or plain data; 0 when value is not a
// string.
func dataURLLen(value []byte) int64 {
	n := dialect.StringLen(value)
	if n > 0 && bytes.HasPrefix(value, []byte(`"data:`)) {
		if comma := bytes.IndexByte(value, ','); comma > 0 {
			// The header's decoded length (its escapes, \u0041, count as
			// the one character each stands for), and the comma.
			n -= dialect.StringLen(append(value[:comma:comma], '"')) + 1
		}
	}
	return int64(max(n, 0))
}

// addToolCall adds a tool call of an assistant message: its function's
// name and arguments, and any member but its id and type by its JSON size
// (a custom tool's input, say).
func addToolCall(s *dialect.PromptSize, c []byte) {
	_ = dialect.EachMemberOfValid(c, func(name, value []byte) {
		switch string(name) {
		case "id", "type":
		case "function":
			addMembers(s, value) // name and arguments
		default:
			s.AddJSON(value)
		}
	})
}

// addTool adds a tool declaration: a function (see addFunction), and any
// other member by its JSON size (a custom tool with its grammar, say).
func addTool(s *dialect.PromptSize, t []byte) {
	_ = dialect.EachMemberOfValid(t, func(name, value []byte) {
		switch string(name) {
		case "type":
		case "function":
			addFunction(s, value)
		default:
			s.AddJSON(value)
		}
	})
}

// addFunction adds a function declaration, of tools or of the deprecated
// functions: every member (name, description, parameters, ...) but the
// strict setting.
func addFunction(s *dialect.PromptSize, f []byte) {
	_ = dialect.EachMemberOfValid(f, func(name, value []byte) {
		if string(name) != "strict" {
			s.AddJSON(value)
		}
	})
}

// addPrediction adds a prediction (Predicted Outputs): its content, as a
// message's, and any member but its type by its JSON size.
func addPrediction(s *dialect.PromptSize, p []byte) {
	if dialect.EachMemberOfValid(p, func(name, value []byte) {
		switch string(name) {
		case "type":
		case "content":
			addContent(s, value)
		default:
			s.AddJSON(value)
		}
	}) != nil {
		s.AddJSON(p)
	}
}

// addMembers adds every member of the object o by its JSON size (a string
// as text); a value that is not an object counts by its JSON size.
func addMembers(s *dialect.PromptSize, o []byte) {
	if dialect.EachMemberOfValid(o, func(_, value []byte) { s.AddJSON(value) }) != nil {
		s.AddJSON(o)
	}
}

// member returns the value of the last top-level member of obj named
// name, the one encoding/json keeps; nil when there is none or obj is not
// an object.
func member(obj []byte, name string) (v []byte) {
	_ = dialect.EachMemberOfValid(obj, func(n, value []byte) {
		if string(n) == name {
			v = value
		}
	})
	return v
}

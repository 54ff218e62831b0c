package openai

import "testing"

// A response's web_search_call and file_search_call output items are
// counted, in a body and in a stream: each call begun
// (response.output_item.added), or the final response's output when it
// lists more.
func TestResponsesToolCalls(t *testing.T) {
	body := []byte(`{"id":"resp_1","object":"response","status":"completed","output":[` +
		`{"type":"web_search_call","id":"ws_1","status":"completed"},` +
		`{"type":"web_search_call","id":"ws_2","status":"completed"},` +
		`{"type":"file_search_call","id":"fs_1","status":"completed","queries":["q"]},` +
		`{"type":"message","id":"msg_1","role":"assistant","content":[{"type":"output_text","text":"hi"}]}],` +
		`"usage":{"input_tokens":100,"output_tokens":20,"total_tokens":120}}`)
	if web, file := ResponsesBodyToolCalls(body); web != 2 || file != 1 {
		t.Errorf("body: %d web, %d file search calls; want 2, 1", web, file)
	}
	if u, ok := ResponsesBodyUsageOfValid(body); !ok || u.Input != 100 || u.Output != 20 || u.WebSearches != 2 || u.FileSearches != 1 {
		t.Errorf("body's usage: %+v %v; want 100 in, 20 out, 2 web and 1 file search calls", u, ok)
	}
	if _, ok := ResponsesBodyUsageOfValid([]byte(`{"output":[],"usage":null}`)); ok {
		t.Error("a null usage: ok; want none")
	}
	if web, file := ResponsesBodyToolCalls([]byte(`{"output":"nope"}`)); web != 0 || file != 0 {
		t.Errorf("an output that is no array: %d, %d; want 0, 0", web, file)
	}

	var a ResponsesAccumulator
	for _, ev := range []string{
		`{"type":"response.created","sequence_number":0,"response":{"id":"resp_2","status":"in_progress","output":[]}}`,
		`{"type":"response.output_item.added","sequence_number":1,"output_index":0,"item":{"type":"web_search_call","id":"ws_1","status":"in_progress"}}`,
		`{"type":"response.output_item.done","sequence_number":2,"output_index":0,"item":{"type":"web_search_call","id":"ws_1","status":"completed"}}`,
		`{"type":"response.output_item.added","sequence_number":3,"output_index":1,"item":{"type":"web_search_call","id":"ws_2","status":"in_progress"}}`,
	} {
		a.Add([]byte(ev))
	}
	// Cut here: the two searches begun are in the estimate.
	if e := a.Estimate(50); e.WebSearches != 2 || e.FileSearches != 0 {
		t.Errorf("cut stream's estimate: %+v, want 2 web searches", e)
	}
	a.Add([]byte(`{"type":"response.completed","sequence_number":4,"response":{"id":"resp_2","status":"completed","output":[` +
		`{"type":"web_search_call","id":"ws_1"},{"type":"web_search_call","id":"ws_2"},{"type":"file_search_call","id":"fs_1"}],` +
		`"usage":{"input_tokens":100,"output_tokens":20,"total_tokens":120}}}`))
	u, ok := a.Usage()
	if !ok || u.WebSearches != 2 || u.FileSearches != 1 || u.Input != 100 {
		t.Errorf("completed stream: %+v (reported %v), want 2 web and 1 file search calls, 100 input tokens", u, ok)
	}
}

package anthropic

import (
	"bytes"
	"encoding/json"

	"github.com/belay-run/belay/internal/fastjson"
)

// CacheControl is a cache breakpoint (Anthropic docs, "Prompt caching"):
// {"type": "ephemeral"} with an optional "ttl" of "5m" (the default) or
// "1h".
type CacheControl struct {
	Type string `json:"type,omitempty"`
	TTL  string `json:"ttl,omitempty"`
}

// cacheBlock is what CacheWrites reads of a content block: its breakpoint,
// and the nested blocks of a tool_result.
type cacheBlock struct {
	CacheControl *CacheControl   `json:"cache_control"`
	Content      json.RawMessage `json:"content"`
}

// CacheWrites reports whether r may write part of its prompt into
// Anthropic's prompt cache (some: a cache_control breakpoint), and
// whether some breakpoint asks for a 1-hour lifetime (hour), which is
// billed at 2× input rather than a 5-minute write's 1.25×. Breakpoints are
// read where the API takes them, on the decoded JSON (so escapes such as
// "cache\u005fcontrol" count, and text or a tool schema that only names
// cache_control does not): the request itself (automatic caching), tool
// definitions, system blocks, message content blocks and the blocks of a
// tool_result. A body with neither "cache_control" nor a \u escape has
// none, without decoding its blocks.
func CacheWrites(r *Request) (some, hour bool) {
	if !bytes.Contains(r.Raw, []byte("cache_control")) && !bytes.Contains(r.Raw, []byte(`\u`)) {
		return false, false
	}
	mark := func(cc *CacheControl) {
		if cc != nil {
			some = true
			hour = hour || cc.TTL == "1h"
		}
	}
	mark(r.CacheControl)
	for _, t := range r.Tools {
		mark(t.CacheControl)
	}
	var blocks func(raw json.RawMessage, depth int)
	blocks = func(raw json.RawMessage, depth int) {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || raw[0] != '[' || depth > 2 {
			return // a string, or absent
		}
		var bs []cacheBlock
		if fastjson.Unmarshal(raw, &bs) != nil {
			return
		}
		for _, b := range bs {
			mark(b.CacheControl)
			blocks(b.Content, depth+1) // a tool_result's blocks
		}
	}
	blocks(r.System, 0)
	for _, m := range r.Messages {
		blocks(m.Content, 0)
	}
	return some, hour
}

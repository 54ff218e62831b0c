package anthropic

import "github.com/belay-run/belay/dialect"

// settings are the top-level request members that are not prompt:
// sampling, limits, thinking and tool-choice options, and metadata (names
// from Anthropic's API reference, "Messages"). Every other member counts
// toward the prompt estimate.
var settings = map[string]bool{
	"model": true, "max_tokens": true, "stream": true, "metadata": true, "stop_sequences": true,
	"temperature": true, "top_p": true, "top_k": true, "thinking": true, "tool_choice": true,
	"service_tier": true, "container": true, "context_management": true,
}

// EstimatePromptTokens estimates the input tokens of r for a budget
// reservation, from r.Raw, the body as sent (ParseRequest keeps it; a
// Request made otherwise must hold valid JSON there):
// ceil(chars/4) (dialect.EstimateTokens) over
//   - the system prompt and the messages' content blocks: text wherever
//     it is (text and thinking blocks, text documents, search results,
//     tool results, nested at any depth), tool_use names and inputs;
//   - tools: names, descriptions and input schemas, a schema counted as
//     its JSON without insignificant whitespace;
//   - every other prompt part, by its JSON size: a top-level member that is
//     not a setting (see settings; output_format's schema, say), a message
//     member or a content block of a type this package does not know. A
//     part belay does not know counts by its size, never as zero;
//
// plus 3 tokens per message, plus a per-block upper bound for images and
// base64 documents (see addBlock). The body is not decoded again: values
// are measured where they lie (dialect.PromptSize). It is an estimate
// (Anthropic's own tokenizer is not public); it is never below 1.
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
		case "system":
			addContent(&s, value)
		case "tools":
			_ = dialect.EachElementOfValid(value, func(t []byte) { addTool(&s, t) })
		default:
			if !settings[string(name)] {
				s.AddJSON(value)
			}
		}
	})
	return max(s.Tokens()+3*messages, 1)
}

// addMessage adds a message's content (see addContent), and any member but
// its role by its JSON size.
func addMessage(s *dialect.PromptSize, m []byte) {
	_ = dialect.EachMemberOfValid(m, func(name, value []byte) {
		switch string(name) {
		case "role":
		case "content":
			addContent(s, value)
		default:
			s.AddJSON(value)
		}
	})
}

// addContent adds a content, of a message, a system prompt, a tool result,
// a search result or a document: a string as text, an array block by block
// (see addBlock).
func addContent(s *dialect.PromptSize, c []byte) {
	if dialect.EachElementOfValid(c, func(b []byte) { addBlock(s, b) }) != nil {
		s.AddJSON(c)
	}
}

// addBlock adds a content block:
//   - text and thinking blocks by their text, tool_use and server_tool_use
//     blocks by their name and input;
//   - tool_result blocks by their content, of any block types;
//   - search_result blocks by their source, title and content;
//   - documents by their source (see addSource), title and context;
//   - an image as dialect.AnthropicImageTokens, whatever its size;
//   - a block of another type by its JSON size.
//
// Members the model does not read (cache_control, citations, signatures)
// are not counted.
func addBlock(s *dialect.PromptSize, b []byte) {
	var typ, text, name, input, content, source, title, context []byte
	_ = dialect.EachMemberOfValid(b, func(n, value []byte) {
		switch string(n) {
		case "type":
			typ = value
		case "text", "thinking":
			text = value
		case "name":
			name = value
		case "input":
			input = value
		case "content":
			content = value
		case "source":
			source = value
		case "title":
			title = value
		case "context":
			context = value
		}
	})
	switch string(typ) {
	case `"text"`, `"thinking"`:
		s.AddText(text)
	case `"tool_use"`, `"server_tool_use"`:
		s.AddText(name)
		s.AddJSON(input)
	case `"tool_result"`:
		addContent(s, content)
	case `"search_result"`:
		s.AddText(source) // a URL
		s.AddText(title)
		addContent(s, content)
	case `"document"`:
		addSource(s, source)
		s.AddText(title)
		s.AddText(context)
	case `"image"`:
		s.AddMedia(dialect.AnthropicImageTokens)
	default:
		s.AddJSON(b)
	}
}

// addSource adds a document's source: base64 data (a PDF) from its size
// (dialect.EstimateDocumentTokens), text data as text, a content source as
// a content (see addContent), a URL or a file id as one page
// (dialect.DocumentPageTokens). A source of another type counts one page
// plus its JSON size; a document without a source, one page.
func addSource(s *dialect.PromptSize, src []byte) {
	var typ, data, content []byte
	_ = dialect.EachMemberOfValid(src, func(n, value []byte) {
		switch string(n) {
		case "type":
			typ = value
		case "data":
			data = value
		case "content":
			content = value
		}
	})
	switch string(typ) {
	case `"base64"`:
		s.AddMedia(dialect.EstimateDocumentTokens(int64(dialect.StringLen(data))))
	case `"text"`:
		s.AddText(data)
	case `"content"`:
		addContent(s, content)
	case `"url"`, `"file"`:
		s.AddMedia(dialect.EstimateDocumentTokens(0))
	default:
		s.AddMedia(dialect.EstimateDocumentTokens(0))
		s.AddJSON(src)
	}
}

// addTool adds a tool: every member (name, description, input_schema, a
// server tool's settings) by its JSON size, but its type and
// cache_control.
func addTool(s *dialect.PromptSize, t []byte) {
	_ = dialect.EachMemberOfValid(t, func(name, value []byte) {
		switch string(name) {
		case "type", "cache_control":
		default:
			s.AddJSON(value)
		}
	})
}

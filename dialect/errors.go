package dialect

import (
	"errors"
	"fmt"

	"github.com/belay-run/belay/failure"
)

// FieldError says which request field is wrong and how. Field is a JSON path
// as the provider would name it ("model", "messages", "messages[2].role",
// "max_tokens"); Problem is a short lower-case phrase ("is required",
// "must be a string").
//
// A *FieldError matches errors.Is(err, failure.InvalidRequest).
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string {
	if e.Field == "body" { // the whole body: "request body is not valid JSON (…)"
		return "request body " + e.Problem
	}
	return fmt.Sprintf("%s: %s", e.Field, e.Problem)
}

// Is reports whether target is failure.InvalidRequest or failure.Permanent.
func (e *FieldError) Is(target error) bool {
	return target == failure.InvalidRequest || target == failure.Permanent
}

// Field returns a *FieldError for field with a formatted problem.
func Field(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// AsFieldError returns the *FieldError in err's chain, or nil.
func AsFieldError(err error) *FieldError {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe
	}
	return nil
}

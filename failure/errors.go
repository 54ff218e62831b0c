package failure

import "errors"

var errorsAs = errors.As

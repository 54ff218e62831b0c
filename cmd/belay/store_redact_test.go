package main

import (
	"strings"
	"testing"
)

// A store URL's password must not appear in belay's messages (redactedURL
// promises "its password replaced by xxxxx"). It does when the URL does
// not parse as a URL (a password with a stray %) or when the password is
// given as a query parameter (a PostgreSQL URL allows ?password=).
func TestStorePasswordNotInErrors(t *testing.T) {
	for _, url := range []string{
		"postgres://u:s3cr%zzet@127.0.0.1:1/db",
		"postgres://u@127.0.0.1:1/db?password=s3cret&connect_timeout=1",
	} {
		_, stderr, err := belay(t, url, "trace", "golden", "show", "g1")
		if err == nil {
			t.Fatalf("%s: no error", url)
		}
		msg := err.Error() + stderr
		if strings.Contains(msg, "s3cr") {
			t.Errorf("store %q: expected an error without the password; got %q", url, err.Error())
		}
	}
}

package gateway

import (
	"fmt"
	"testing"
)

// The context cache keeps each tenant's responses apart and forgets the
// oldest past contextCacheMax.
func TestContextCache(t *testing.T) {
	var c contextCache
	c.put("acme", "resp_0", 100)
	if n, ok := c.get("acme", "resp_0"); !ok || n != 100 {
		t.Fatalf("get = %d %v", n, ok)
	}
	if _, ok := c.get("globex", "resp_0"); ok {
		t.Error("another tenant's response found")
	}
	c.put("acme", "resp_0", 150) // the same id again: updated, not a second entry
	for i := 1; i < contextCacheMax; i++ {
		c.put("acme", fmt.Sprint("resp_", i), int64(i))
	}
	if n, ok := c.get("acme", "resp_0"); !ok || n != 150 || len(c.order) != contextCacheMax {
		t.Fatalf("full: resp_0 = %d %v, %d entries", n, ok, len(c.order))
	}
	c.put("acme", "resp_new", 7)
	if _, ok := c.get("acme", "resp_0"); ok {
		t.Error("the oldest entry kept past the bound")
	}
	if n, ok := c.get("acme", "resp_1"); !ok || n != 1 {
		t.Error("the second oldest entry lost")
	}
	if n, ok := c.get("acme", "resp_new"); !ok || n != 7 || len(c.sizes) != contextCacheMax {
		t.Errorf("new entry %d %v; %d entries", n, ok, len(c.sizes))
	}
	c.put("acme", "", 5)
	c.put("acme", "resp_zero", 0)
	if _, ok := c.get("acme", "resp_zero"); ok || len(c.sizes) != contextCacheMax {
		t.Error("an entry without id or tokens kept")
	}
}

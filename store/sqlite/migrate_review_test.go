package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/belay-run/belay/store"
)

func adv2OldFile(t *testing.T, upto int, n int) string {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "belay.db")
	db, err := sql.Open("sqlite", path+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for v := 1; v <= upto; v++ {
		if err := step(ctx, db, v); err != nil {
			t.Fatal(err)
		}
	}
	tenants := []string{"acme", "beta", "Acme", ""}
	statuses := []string{"running", "succeeded", "failed", "stopped"}
	for i := 0; i < n; i++ {
		var started any = int64(1000 + i%7) // ties on started
		if i%11 == 0 {
			started = nil
		}
		var labels any = fmt.Sprintf(`{"i":"%d","u":"é\u0000"}`, i)
		if i%3 == 0 {
			labels = nil
		}
		if _, err := db.Exec(`INSERT INTO runs (id, tenant, agent, agent_version, prompt_version, labels, max_turns,
		deadline_ns, max_tokens, max_cost, status, stop_reason, error, started_ns, ended_ns, turns, tool_calls,
		input_tokens, output_tokens, cost) VALUES (?, ?, 'a', 'v', 'p', ?, ?, ?, ?, ?, ?, 'sr', 'e', ?, ?, ?, ?, ?, ?, ?)`,
			fmt.Sprintf("run-%03d", (i*37)%n), tenants[i%4], labels, i, int64(i)*1e9, int64(i)*10, int64(i)*1_000_000,
			statuses[i%4], started, nil, i, i+1, int64(i)*3, int64(i)*5, int64(i)*7); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

var adv2Filters = []store.RunFilter{
	{}, {Limit: 5}, {Tenant: "acme"}, {Tenant: "Acme", Limit: 3}, {Status: "failed"},
	{Tenant: "beta", Status: "stopped"},
	{Since: time.Unix(0, 1003)}, {Before: time.Unix(0, 1003)}, {Since: time.Unix(0, 1002), Before: time.Unix(0, 1005), Limit: 4},
	{Tenant: "acme", Since: time.Unix(0, 1001), Before: time.Unix(0, 1006)},
	{Limit: 1000},
}

func adv2List(t *testing.T, db *sql.DB, f store.RunFilter) []string {
	q := `SELECT id FROM runs WHERE 1=1`
	var args []any
	if f.Tenant != "" {
		q += ` AND tenant = ?`
		args = append(args, f.Tenant)
	}
	if f.Status != "" {
		q += ` AND status = ?`
		args = append(args, string(f.Status))
	}
	if !f.Since.IsZero() {
		q += ` AND started_ns >= ?`
		args = append(args, f.Since.UnixNano())
	}
	if !f.Before.IsZero() {
		q += ` AND started_ns < ?`
		args = append(args, f.Before.UnixNano())
	}
	l := f.Limit
	if l <= 0 {
		l = 100
	}
	q += fmt.Sprintf(` ORDER BY started_ns DESC, id DESC LIMIT %d`, l)
	rows, err := db.Query(q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		rows.Scan(&id)
		out = append(out, id)
	}
	return out
}

func adv2Dump(t *testing.T, db *sql.DB) [][]any {
	rows, err := db.Query(`SELECT ` + "id, tenant, agent, agent_version, prompt_version, labels, max_turns, deadline_ns, max_tokens, max_cost, status, stop_reason, error, started_ns, ended_ns, turns, tool_calls, input_tokens, output_tokens, cost" + ` FROM runs ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		vals := make([]any, 20)
		ptrs := make([]any, 20)
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, vals)
	}
	return out
}

func TestReview3bMigratePreservesRunsAndOrder(t *testing.T) {
	for _, from := range []int{1, 2, 3} {
		t.Run(fmt.Sprint("v", from), func(t *testing.T) {
			ctx := context.Background()
			path := adv2OldFile(t, from, 200)
			db, _ := sql.Open("sqlite", path)
			before := adv2Dump(t, db)
			var lists [][]string
			for _, f := range adv2Filters {
				lists = append(lists, adv2List(t, db, f))
			}
			db.Close()
			s, err := Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			w := s.Backend().(*backend).w
			if after := adv2Dump(t, w); !reflect.DeepEqual(before, after) {
				t.Fatalf("rows changed by migration")
			}
			for i, f := range adv2Filters {
				got, err := s.ListRuns(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				var ids []string
				for _, r := range got {
					ids = append(ids, r.ID)
				}
				if !reflect.DeepEqual(ids, lists[i]) {
					t.Errorf("ListRuns(%+v) = %v; before migration %v", f, ids, lists[i])
				}
			}
			var ic string
			w.QueryRow(`PRAGMA integrity_check`).Scan(&ic)
			if ic != "ok" {
				t.Errorf("integrity_check: %s", ic)
			}
			var sqlText string
			w.QueryRow(`SELECT sql FROM sqlite_master WHERE name='runs'`).Scan(&sqlText)
			var idx int
			w.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type='index' AND tbl_name='runs' AND name LIKE 'runs_by_%'`).Scan(&idx)
			if idx != 2 {
				t.Errorf("indexes on runs: %d", idx)
			}
		})
	}
}

// Several "processes" (here: separate Opens, and separate OS processes)
// open one old file at once.
func TestReview3bConcurrentOpenMigrates(t *testing.T) {
	ctx := context.Background()
	for round := 0; round < 5; round++ {
		path := adv2OldFile(t, 1, 300)
		var wg sync.WaitGroup
		errs := make([]error, 8)
		for i := range errs {
			wg.Go(func() {
				s, err := Open(ctx, path)
				if err == nil {
					_, err = s.ListRuns(ctx, store.RunFilter{Tenant: "acme"})
					s.Close()
				}
				errs[i] = err
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("round %d open %d: %v", round, i, err)
			}
		}
		db, _ := sql.Open("sqlite", path)
		var n int
		db.QueryRow(`SELECT count(*) FROM runs`).Scan(&n)
		var v int
		db.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&v)
		db.Close()
		if n != 300 || v != len(migrations) {
			t.Errorf("round %d: %d runs, %d migration rows", round, n, v)
		}
	}
}

func TestReview3bProcessOpenHelper(t *testing.T) {
	p := os.Getenv("ADV2_OPEN")
	if p == "" {
		t.Skip("helper")
	}
	s, err := Open(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListRuns(context.Background(), store.RunFilter{}); err != nil {
		t.Fatal(err)
	}
	s.Close()
}

func TestReview3bMultiProcessMigrate(t *testing.T) {
	for round := 0; round < 3; round++ {
		path := adv2OldFile(t, 2, 2000)
		var wg sync.WaitGroup
		outs := make([][]byte, 6)
		errs := make([]error, 6)
		for i := range outs {
			wg.Go(func() {
				cmd := exec.Command(os.Args[0], "-test.run=^TestReview3bProcessOpenHelper$", "-test.count=1")
				cmd.Env = append(os.Environ(), "ADV2_OPEN="+path)
				outs[i], errs[i] = cmd.CombinedOutput()
			})
		}
		wg.Wait()
		for i := range outs {
			if errs[i] != nil {
				t.Errorf("round %d proc %d: %v\n%s", round, i, errs[i], outs[i])
			}
		}
		db, _ := sql.Open("sqlite", path)
		var n, v int
		db.QueryRow(`SELECT count(*) FROM runs`).Scan(&n)
		db.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&v)
		db.Close()
		if n != 2000 || v != len(migrations) {
			t.Errorf("round %d: %d runs, %d migration rows", round, n, v)
		}
	}
}

package sqlite

import "testing"

func TestSQLiteParams(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`SELECT 1`, `SELECT 1`},
		{`INSERT INTO t (a, b, c) VALUES ($1, $2, $3)`, `INSERT INTO t (a, b, c) VALUES (?, ?, ?)`},
		{`UPDATE t SET a = $2 WHERE id = $1`, `UPDATE t SET a = ?2 WHERE id = ?1`},
		{`SELECT a FROM t WHERE $1 = '' OR state = $1`, `SELECT a FROM t WHERE ?1 = '' OR state = ?1`},
		{`VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, `VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{`VALUES ($1, $3)`, `VALUES (?1, ?3)`},
		{`VALUES ($1, $01)`, `VALUES (?1, ?01)`},
	} {
		if got := sqliteParams(c.in); got != c.want {
			t.Errorf("sqliteParams(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

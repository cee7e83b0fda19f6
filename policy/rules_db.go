package policy

import "strings"

// sqlClient handles SQL command-line clients.
func (a *analyzer) sqlClient(c *call) {
	var sqls []string
	inMemory := false
	args := c.args
	valueOf := func(i int, s, short, long string) (string, int, bool) {
		switch {
		case s == short || s == long:
			if i+1 < len(args) {
				return args[i+1].s, i + 1, true
			}
		case long != "" && strings.HasPrefix(s, long+"="):
			return s[len(long)+1:], i, true
		case short != "" && len(short) == 2 && strings.HasPrefix(s, short) && len(s) > 2 && c.name == "mysql":
			return s[2:], i, true
		}
		return "", i, false
	}
	switch c.name {
	case "sqlite3", "duckdb":
		var pos []string
		for i := 0; i < len(args); i++ {
			s := args[i].s
			switch {
			case s == "-cmd":
				if i+1 < len(args) {
					sqls = append(sqls, args[i+1].s)
				}
				i++
			case s == "-init" || s == "-separator" || s == "-newline" || s == "-nullvalue" || s == "-c":
				if s == "-c" && c.name == "duckdb" && i+1 < len(args) {
					sqls = append(sqls, args[i+1].s)
				}
				i++
			case strings.HasPrefix(s, "-"):
			default:
				pos = append(pos, s)
			}
		}
		if len(pos) == 0 || pos[0] == ":memory:" || pos[0] == "" {
			inMemory = true
		}
		if len(pos) > 1 {
			sqls = append(sqls, pos[1:]...)
		}
	default:
		short, long := "-c", "--command"
		switch c.name {
		case "mysql":
			short, long = "-e", "--execute"
		case "sqlcmd":
			short, long = "-Q", "--query"
		case "clickhouse-client", "clickhouse", "snowsql":
			short, long = "-q", "--query"
		case "cockroach", "cqlsh":
			short, long = "-e", "--execute"
		case "bq":
			if len(args) > 0 && args[0].s == "query" {
				for _, f := range nonOptions(args[1:], "") {
					sqls = append(sqls, f.s)
				}
			}
		}
		for i := 0; i < len(args); i++ {
			s := args[i].s
			if v, j, ok := valueOf(i, s, short, long); ok {
				sqls = append(sqls, v)
				i = j
				continue
			}
			if c.name == "sqlcmd" {
				if v, j, ok := valueOf(i, s, "-q", ""); ok {
					sqls = append(sqls, v)
					i = j
				}
			}
		}
	}
	for _, s := range sqls {
		a.dbShellEscapes(c.name, s)
	}
	if c.in.known {
		a.dbShellEscapes(c.name, c.in.text)
	}
	if inMemory {
		return
	}
	for _, s := range sqls {
		if destructiveSQL(s) {
			a.add(ruleSQL)
		}
	}
	if c.in.known && destructiveSQL(c.in.text) {
		a.add(ruleSQL)
	}
}

// destructiveSQL reports whether text has a DROP TABLE/DATABASE/SCHEMA,
// TRUNCATE, or a DELETE or UPDATE without WHERE.
func destructiveSQL(text string) bool {
	if text == "" {
		return false
	}
	text = stripSQLComments(strings.ToUpper(text))
	if strings.Contains(text, "EXECUTE") || strings.Contains(text, "PREPARE") || strings.Contains(text, "EXEC(") ||
		strings.Contains(text, "SP_EXECUTESQL") || strings.Contains(text, "DO $$") {
		// Dynamic SQL: the statement is built from string literals.
		if inner := sqlLiterals(text); inner != "" && inner != text && destructiveSQL(inner) {
			return true
		}
	}
	for _, stmt := range strings.Split(text, ";") {
		w := strings.Fields(stmt)
		if len(w) == 0 {
			continue
		}
		switch w[0] {
		case "DROP":
			if len(w) > 1 {
				switch w[1] {
				case "TABLE", "DATABASE", "SCHEMA", "COLLECTION", "KEYSPACE":
					return true
				}
			}
		case "TRUNCATE":
			return true
		case "PREPARE", "EXPLAIN":
			// PREPARE name AS statement: judge the statement.
			for k, x := range w {
				if x == "AS" && k+1 < len(w) && destructiveSQL(strings.Join(w[k+1:], " ")) {
					return true
				}
			}
		case "ALTER":
			if containsWord(w, "DROP") {
				return true
			}
		case "DELETE":
			if !containsWord(w, "WHERE") {
				return true
			}
		case "UPDATE":
			if containsWord(w, "SET") && !containsWord(w, "WHERE") {
				return true
			}
		}
	}
	return false
}

func containsWord(ws []string, w string) bool {
	for _, x := range ws {
		if x == w || strings.HasPrefix(x, w+"(") {
			return true
		}
	}
	return false
}

func stripSQLComments(s string) string {
	if !strings.Contains(s, "--") && !strings.Contains(s, "/*") {
		return s
	}
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], "--"):
			j := strings.IndexByte(s[i:], '\n')
			if j < 0 {
				return sb.String()
			}
			i += j
			sb.WriteByte('\n')
		case strings.HasPrefix(s[i:], "/*"):
			j := strings.Index(s[i+2:], "*/")
			if j < 0 {
				return sb.String()
			}
			i += j + 3
			sb.WriteByte(' ')
		default:
			sb.WriteByte(s[i])
		}
	}
	return sb.String()
}

// database handles Redis, MongoDB and database admin tools.
func (a *analyzer) database(c *call) {
	switch c.name {
	case "redis-cli":
		words := nonOptions(c.args, "hpanur")
		text := strings.ToUpper(joinFields(words).s + " " + c.in.text)
		if strings.Contains(text, "FLUSHALL") || strings.Contains(text, "FLUSHDB") {
			a.add(ruleDatabase)
		}
		if strings.Contains(text, "CONFIG SET DIR") || strings.Contains(text, "CONFIG SET DBFILENAME") {
			a.add(ruleDatabase)
		}
	case "mongo":
		text := c.in.text
		for i, f := range c.args {
			if (f.s == "--eval" || f.s == "-e") && i+1 < len(c.args) {
				text += "\n" + c.args[i+1].s
			}
		}
		if strings.Contains(text, "dropDatabase") || strings.Contains(text, ".drop(") ||
			strings.Contains(text, "deleteMany({})") || strings.Contains(text, "remove({})") {
			a.add(ruleDatabase)
		}
	case "dropdb", "dropuser":
		for _, f := range c.args {
			if f.s == "--help" || f.s == "--version" {
				return
			}
		}
		if len(c.args) > 0 {
			a.add(ruleDatabase)
		}
	case "mysqladmin":
		for _, f := range c.args {
			if f.s == "drop" {
				a.add(ruleDatabase)
			}
		}
	}
}

// dbTask handles framework task runners that can drop or wipe a database.
func (a *analyzer) dbTask(c *call) {
	if frameworkDBDestroy(c.name, c.args) {
		a.add(ruleDatabase)
	}
	a.generic(c)
}

// frameworkDBDestroy reports whether a framework's task runner (tool is its
// command or script name) is asked to drop, reset or flush the database:
// rails db:drop, manage.py flush, artisan migrate:fresh, mix ecto.reset,
// prisma migrate reset.
func frameworkDBDestroy(tool string, args []field) bool {
	var words []string
	force := false
	for _, f := range args {
		switch {
		case f.s == "--help" || f.s == "-h" || f.s == "help":
			return false
		case f.s == "--force-reset" || f.s == "--accept-data-loss":
			force = true
		case !strings.HasPrefix(f.s, "-"):
			words = append(words, f.s)
		}
	}
	if len(words) == 0 {
		return false
	}
	switch tool {
	case "rails", "rake":
		for _, w := range words {
			switch w {
			case "db:drop", "db:drop:all", "db:reset", "db:purge", "db:purge:all", "db:migrate:reset":
				return true
			}
		}
	case "manage.py", "django-admin":
		return words[0] == "flush" || words[0] == "reset_db"
	case "artisan":
		return words[0] == "db:wipe" || words[0] == "migrate:fresh" || words[0] == "migrate:reset"
	case "mix":
		for _, w := range words {
			if w == "ecto.drop" || w == "ecto.reset" {
				return true
			}
		}
	case "prisma":
		return len(words) > 1 && (words[0] == "migrate" && words[1] == "reset" || words[0] == "db" && words[1] == "push" && force)
	}
	return false
}

// sqlLiterals joins the single-quoted string literals of an SQL text, which
// dynamic SQL (PREPARE s FROM '...', EXECUTE 'DROP TABLE ' || t) runs.
func sqlLiterals(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\'' {
			continue
		}
		j := i + 1
		for j < len(s) && !(s[j] == '\'' && (j+1 >= len(s) || s[j+1] != '\'')) {
			if s[j] == '\'' {
				j++
			}
			j++
		}
		sb.WriteString(strings.ReplaceAll(s[i+1:min(j, len(s))], "''", "'"))
		i = j
	}
	return sb.String()
}

// dbShellEscapes finds a database client's own ways to run a shell command
// in its input: sqlite3's .shell/.system and output pipes, psql's \! and
// \o |cmd, COPY ... PROGRAM, mysql's \! and system. The command is judged,
// and the escape itself needs approval: it hides a command in SQL text.
func (a *analyzer) dbShellEscapes(client, text string) {
	if !strings.ContainsAny(text, `.\`) && !strings.Contains(strings.ToLower(text), "program") &&
		!strings.Contains(strings.ToLower(text), "system") && !strings.Contains(strings.ToLower(text), "pager") {
		return
	}
	run := func(cmd string) {
		cmd = strings.TrimSpace(strings.Trim(strings.TrimSpace(cmd), `'"`))
		cmd = strings.TrimSpace(strings.TrimPrefix(cmd, "|"))
		a.add(ruleProgramOption)
		if cmd != "" {
			a.shellCode(field{s: cmd}, desc{}, nil, false)
		}
	}
	if client == "mysql" {
		text = strings.ReplaceAll(text, ";", "\n")
	}
	for _, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		lower := strings.ToLower(t)
		if i := strings.Index(t, `\!`); i >= 0 && client != "sqlite3" && client != "duckdb" {
			run(t[i+2:])
			continue
		}
		switch client {
		case "sqlite3", "duckdb":
			for _, p := range [...]string{".shell", ".system", ".sh "} {
				if strings.HasPrefix(lower, p) {
					run(t[len(p):])
				}
			}
			for _, p := range [...]string{".once", ".output", ".import", ".read"} {
				if rest, ok := strings.CutPrefix(lower, p); ok && strings.HasPrefix(strings.TrimLeft(rest, ` '"`), "|") {
					run(t[len(p):])
				}
			}
		case "psql":
			for _, p := range [...]string{`\o`, `\g`, `\gx`, `\out`} {
				if rest, ok := strings.CutPrefix(t, p+" "); ok && strings.HasPrefix(strings.TrimSpace(rest), "|") {
					run(rest)
				}
			}
		case "mysql":
			for _, p := range [...]string{"system ", `\p `, "pager "} {
				if strings.HasPrefix(lower, strings.ToLower(p)) {
					run(t[len(p):])
				}
			}
		}
		if i := strings.Index(lower, " program "); i >= 0 && (strings.Contains(lower, "copy ") || strings.Contains(lower, `\copy`)) {
			run(t[i+len(" program "):])
		}
	}
}

package policy

import (
	"slices"
	"strings"

	"mvdan.cc/sh/v3/syntax"
)

const (
	maxDepth     = 8     // nested shell or interpreter texts
	maxSteps     = 30000 // words, statements and commands visited
	maxFuncCalls = 16    // function bodies re-walked with call arguments
	maxLoopItems = 16    // for-loop items bound one by one
	maxEdges     = 512   // function calls recorded for fork-bomb detection
)

// desc describes the data a command writes to stdout (or reads on stdin).
type desc struct {
	text  string // the data, when known
	known bool
	t     taint
	hint  string // for find or ls output: a path that stands for each line
	// src, when the text is not known, names the file whose content (as it was before this
	// command line) this is: a copy, a link or a cat of a file not read yet (see runContent).
	src string
	// unseen marks a file this command line wrote with content the analysis cannot know.
	unseen bool
	// program marks a file the command runs whose content is a compiled program.
	program bool
}

func concatDesc(x, y desc) desc {
	if x.known && x.text == "" && x.t == 0 && x.hint == "" {
		return y // nothing before: y as it is (a file's content, or its name: desc.src)
	}
	d := desc{known: x.known && y.known, t: x.t | y.t, hint: x.hint}
	if d.known {
		d.text = x.text + y.text
	}
	if y.hint != "" {
		d.hint = y.hint
	}
	return d
}

type funcEdge struct {
	from, to string
	fork     bool // made in a pipeline, subshell or substitution
	bg       bool // made in the background
}

type funcFrame struct {
	name     string
	forkBase int
	bgBase   int
	defining bool // walked at its definition, not at a call
}

// analyzer holds the state of one Classify call.
type analyzer struct {
	c        *Classifier
	hit      [numRules]bool
	order    []ruleID
	parseErr string

	depth      int
	steps      int
	overBudget bool

	vars      map[string]value
	aliases   map[string]string
	funcs     map[string]*syntax.Stmt
	frames    []funcFrame
	edges     []funcEdge
	forking   int
	bg        int // nesting of background statements
	bulk      int // inside find -exec or xargs: each command runs on many files
	findAll   int // inside find -exec on an unfiltered tree: "{}" is every file in it
	funcCalls int

	pos    []field // $0, $1, ...
	posSet bool

	cwd    string // "" is the working tree root
	cwdDyn bool

	files map[string]desc // data written to files earlier in the command
	line  map[string]bool // the files in files that the command line itself wrote
	blind bool            // an earlier command wrote files whose names are not known (tar x, git clone…)
	made  map[string]bool // directories mkdir made earlier in the command

	sess  *session // set by ClassifyIn: the session the command runs in
	ran   []string // the programs the command runs, after wrappers
	wrote []string // the files the command writes (devices left out)

	newRemotes map[string]bool // git remotes added or re-pointed earlier in the command
	piping     int             // inside a pipeline stage whose output feeds the next
	pipedIn    int             // inside a pipeline stage whose input is the previous stage's output

	// Reverse-shell bookkeeping: what the current pipeline stage runs.
	stageNet, stageShell bool
	sawMkfifo, sawNet    bool
	lastCmd              string
	lastArgc             int
}

func newAnalyzer(c *Classifier) *analyzer {
	if c == nil || c.home == "" {
		c = defaultClassifier // a zero Classifier behaves like New(Options{})
	}
	return &analyzer{c: c}
}

func (a *analyzer) add(r ruleID) {
	if !a.hit[r] {
		a.hit[r] = true
		a.order = append(a.order, r)
	}
}

func (a *analyzer) step() bool {
	a.steps++
	if a.steps > maxSteps {
		if !a.overBudget {
			a.overBudget = true
			a.add(ruleTooComplex)
		}
		return false
	}
	return true
}

func (a *analyzer) result(command string) Analysis {
	res := Analysis{Command: command, Verdict: VerdictSafe, Findings: []Finding{}}
	for _, r := range a.order {
		info := ruleTable[r]
		f := Finding{Rule: info.ID, Description: info.Description, Verdict: info.Verdict}
		if r == ruleUnparseable && a.parseErr != "" {
			// The description stays a stable allowlist key; the parser's words are a note.
			res.Notes = append(res.Notes, "parse error: "+a.parseErr)
		}
		res.Findings = append(res.Findings, f)
		if info.Verdict.rank() > res.Verdict.rank() {
			res.Verdict = info.Verdict
		}
	}
	slices.SortStableFunc(res.Findings, func(x, y Finding) int { return y.Verdict.rank() - x.Verdict.rank() })
	return res
}

// finish runs the checks that need the whole command.
func (a *analyzer) finish() {
	if a.sawMkfifo && a.sawNet {
		a.add(ruleReverseShell)
	}
	a.checkForkBomb()
}

// parse parses text as bash. It returns nil after recording a finding when
// strict, or silently otherwise.
func (a *analyzer) parse(text string, strict bool) *syntax.File {
	p, _ := a.c.parsers.Get().(*syntax.Parser)
	if p == nil {
		p = syntax.NewParser(syntax.Variant(syntax.LangBash))
	}
	f, err := p.Parse(strings.NewReader(text), "")
	a.c.parsers.Put(p)
	if err != nil {
		if strict {
			if a.parseErr == "" {
				a.parseErr = err.Error()
			}
			a.add(ruleUnparseable)
		}
		return nil
	}
	return f
}

// runScript parses text as shell code and walks it. pos, when posSet, are
// the positional parameters ($0 first).
func (a *analyzer) runScript(text string, in desc, pos []field, posSet bool) desc {
	out, _ := a.runScriptMode(text, in, pos, posSet, true)
	return out
}

// runScriptMode is runScript that, unless strict, says whether text parsed
// instead of recording a finding when it does not.
func (a *analyzer) runScriptMode(text string, in desc, pos []field, posSet, strict bool) (desc, bool) {
	if a.depth >= maxDepth || len(text) > maxCommandLen {
		a.add(ruleTooComplex)
		return desc{}, true
	}
	a.steps += len(text) / 64
	if !a.step() {
		return desc{}, true
	}
	f := a.parse(text, strict)
	if f == nil {
		if forkBombText(text) {
			a.add(ruleForkBomb)
		}
		return desc{}, false
	}
	a.depth++
	savedPos, savedSet := a.pos, a.posSet
	if posSet {
		a.pos, a.posSet = pos, true
	}
	out := a.walkStmts(f.Stmts, in)
	a.pos, a.posSet = savedPos, savedSet
	a.depth--
	return out, true
}

func (a *analyzer) walkStmts(stmts []*syntax.Stmt, in desc) desc {
	out := desc{known: true}
	for _, s := range stmts {
		out = concatDesc(out, a.walkStmt(s, in))
	}
	return out
}

func (a *analyzer) walkStmt(s *syntax.Stmt, in desc) desc {
	if s == nil || !a.step() {
		return desc{}
	}
	if s.Background || s.Coprocess {
		a.forking++
		a.bg++
		defer func() { a.forking--; a.bg-- }()
	}
	var outs []*syntax.Redirect
	tcp, dup := false, false
	for _, r := range s.Redirs {
		a.substsWord(r.Word)
		if r.Hdoc != nil {
			a.substsWord(r.Hdoc)
		}
		switch r.Op {
		case syntax.Hdoc, syntax.DashHdoc:
			in = a.heredoc(r)
		case syntax.WordHdoc:
			f := a.word1(r.Word)
			in = desc{text: f.s + "\n", known: !f.dyn, t: f.t}
		case syntax.RdrIn:
			f := a.word1(r.Word)
			tcp = tcp || isDevNet(f.s)
			in = a.readFile(f)
		case syntax.DplIn, syntax.DplOut:
			f := a.word1(r.Word)
			if isFD(f.s) {
				dup = true
				continue
			}
			tcp = tcp || isDevNet(f.s)
			if r.Op == syntax.DplOut {
				outs = append(outs, r)
			}
		case syntax.RdrInOut:
			f := a.word1(r.Word)
			tcp = tcp || isDevNet(f.s)
			outs = append(outs, r)
		default:
			outs = append(outs, r)
		}
	}
	a.lastCmd, a.lastArgc = "", 0
	out := a.walkCommand(s.Cmd, in)
	for _, r := range outs {
		f := a.word1(r.Word)
		if f.procOut != nil {
			a.procOut(f.procOut, out)
			continue
		}
		if isDevNet(f.s) {
			tcp = true
			continue
		}
		a.writeTarget(f, wRedirect, out)
		switch {
		case out.t&tInfinite != 0 && !strings.HasPrefix(f.s, "/dev/"):
			a.add(ruleFillDisk)
		case (r.Op == syntax.RdrOut || r.Op == syntax.RdrClob) && out.known && out.text == "" &&
			(s.Cmd == nil || a.lastCmd == ":" || a.lastCmd == "true" || a.lastCmd == "cat" || a.lastCmd == "echo" || a.lastCmd == "printf"):
			a.truncateTarget(f)
		}
		if r.N == nil || r.N.Value == "1" || r.Op == syntax.RdrAll || r.Op == syntax.AppAll {
			out = desc{known: true}
		}
	}
	if tcp {
		a.devNet(dup)
	}
	return out
}

// procOut walks the commands of a >(...) substitution that read in.
func (a *analyzer) procOut(stmts []*syntax.Stmt, in desc) {
	a.forking++
	a.walkStmts(stmts, in)
	a.forking--
}

func isFD(s string) bool {
	if s == "-" {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			if i > 0 && i == len(s)-1 && s[i] == '-' {
				return true
			}
			return false
		}
	}
	return s != ""
}

func isDevNet(s string) bool {
	return strings.HasPrefix(s, "/dev/tcp/") || strings.HasPrefix(s, "/dev/udp/")
}

// devNet judges a statement that opens /dev/tcp or /dev/udp.
func (a *analyzer) devNet(dup bool) {
	a.sawNet = true
	switch {
	case isShell(a.lastCmd) || dup || (a.lastCmd == "exec" && a.lastArgc == 0):
		a.add(ruleReverseShell)
	case a.lastCmd == "" || a.lastCmd == "echo" || a.lastCmd == "printf" || a.lastCmd == "true" || a.lastCmd == ":":
		// A bare open or an echo is a port probe.
	default:
		a.add(ruleDevTCP)
	}
}

func (a *analyzer) heredoc(r *syntax.Redirect) desc {
	if r.Hdoc == nil {
		return desc{known: true}
	}
	var sb strings.Builder
	var t taint
	for _, p := range r.Hdoc.Parts {
		switch p := p.(type) {
		case *syntax.Lit:
			sb.WriteString(p.Value)
		default:
			var b fieldBuilder
			a.wordPart(&b, p, false, true)
			b.flush()
			for _, f := range b.out {
				sb.WriteString(f.s)
				t |= f.t
			}
		}
	}
	text := sb.String()
	if r.Op == syntax.DashHdoc {
		lines := strings.Split(text, "\n")
		for i, l := range lines {
			lines[i] = strings.TrimLeft(l, "\t")
		}
		text = strings.Join(lines, "\n")
	}
	// Unresolved parts stay marked; the text is still useful.
	return desc{text: text, known: true, t: t}
}

func (a *analyzer) walkCommand(cmd syntax.Command, in desc) desc {
	switch x := cmd.(type) {
	case nil:
		return desc{known: true}
	case *syntax.CallExpr:
		return a.callExpr(x, in)
	case *syntax.BinaryCmd:
		if x.Op == syntax.Pipe || x.Op == syntax.PipeAll {
			return a.pipeline(x, in)
		}
		return concatDesc(a.walkStmt(x.X, in), a.walkStmt(x.Y, in))
	case *syntax.Subshell:
		cwd, dyn := a.cwd, a.cwdDyn
		a.forking++
		out := a.walkStmts(x.Stmts, in)
		a.forking--
		a.cwd, a.cwdDyn = cwd, dyn
		return out
	case *syntax.Block:
		return a.walkStmts(x.Stmts, in)
	case *syntax.IfClause:
		out := desc{known: true}
		for c := x; c != nil; c = c.Else {
			a.walkStmts(c.Cond, in)
			out = concatDesc(out, a.walkStmts(c.Then, in))
		}
		return out
	case *syntax.WhileClause:
		a.walkStmts(x.Cond, in)
		out := a.walkStmts(x.Do, in)
		if a.infiniteCond(x) && spawnsWithoutPause(x.Do) {
			a.add(ruleForkBomb)
		} else if a.infiniteCond(x) && fillsWithoutPause(x.Do) {
			a.add(ruleFillDisk)
		}
		return out
	case *syntax.ForClause:
		return a.forClause(x, in)
	case *syntax.CaseClause:
		a.substsWord(x.Word)
		out := desc{known: true}
		for _, it := range x.Items {
			for _, p := range it.Patterns {
				a.substsWord(p)
			}
			out = concatDesc(out, a.walkStmts(it.Stmts, in))
		}
		return out
	case *syntax.FuncDecl:
		if x.Name != nil {
			a.defineFunc(x.Name.Value, x.Body)
		}
		for _, n := range x.Names {
			a.defineFunc(n.Value, x.Body)
		}
		return desc{known: true}
	case *syntax.ArithmCmd:
		a.substsArith(x.X)
	case *syntax.TestClause:
		a.substsTest(x.X)
	case *syntax.DeclClause:
		a.declClause(x)
	case *syntax.LetClause:
		for _, e := range x.Exprs {
			a.substsArith(e)
		}
	case *syntax.TimeClause:
		return a.walkStmt(x.Stmt, in)
	case *syntax.CoprocClause:
		a.forking++
		defer func() { a.forking-- }()
		return a.walkStmt(x.Stmt, in)
	case *syntax.TestDecl:
		return a.walkStmt(x.Body, in)
	}
	return desc{known: true}
}

func (a *analyzer) pipeline(x *syntax.BinaryCmd, in desc) desc {
	var stages []*syntax.Stmt
	var flatten func(s *syntax.Stmt)
	flatten = func(s *syntax.Stmt) {
		if b, ok := s.Cmd.(*syntax.BinaryCmd); ok && (b.Op == syntax.Pipe || b.Op == syntax.PipeAll) &&
			len(s.Redirs) == 0 && !s.Negated && !s.Background {
			flatten(b.X)
			flatten(b.Y)
			return
		}
		stages = append(stages, s)
	}
	flatten(x.X)
	flatten(x.Y)
	a.forking++
	defer func() { a.forking-- }()
	net, shell := false, false
	cur := in
	for k, st := range stages {
		a.stageNet, a.stageShell = false, false
		if k < len(stages)-1 {
			a.piping++
		}
		if k > 0 {
			a.pipedIn++
		}
		cur = a.walkStmt(st, cur)
		if k < len(stages)-1 {
			a.piping--
		}
		if k > 0 {
			a.pipedIn--
		}
		net = net || a.stageNet
		shell = shell || a.stageShell
	}
	if net && shell {
		a.add(ruleReverseShell)
	}
	return cur
}

func (a *analyzer) callExpr(x *syntax.CallExpr, in desc) desc {
	for _, as := range x.Assigns {
		a.substsAssign(as)
	}
	for _, w := range x.Args {
		a.substsWord(w)
	}
	if len(x.Args) > 0 && computedWord(x.Args[0]) {
		a.add(ruleDynamicCommand)
	}
	if len(x.Args) == 0 {
		for _, as := range x.Assigns {
			a.assign(as, true)
		}
		return desc{known: true}
	}
	for _, as := range x.Assigns {
		a.assign(as, false)
		if as.Name != nil && programEnv[as.Name.Value] && as.Value != nil {
			a.programOption(a.word1(as.Value))
		}
	}
	return a.exec(a.fieldsOf(x.Args), in)
}

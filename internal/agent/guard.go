//go:build unix

package agent

import (
	"os"
	"strconv"
	"sync"
	"syscall"
)

// guardScript is the one guard of a server (Options.Guard). It reads "+PGID" and "-PGID"
// lines on fd 3 — the foreground commands' process groups as they start and end — and when
// fd 3 ends (every holder of the other end is gone: the server's process ended, however), it
// kills the groups still listed. Removing one uses parameter expansion only: the guard forks
// nothing while commands run.
const guardScript = `g=' '
while read -r l <&3; do
	p=${l#?}
	case $l in
	+*) g="$g$p " ;;
	-*) case $g in *" $p "*) g="${g%% $p *} ${g#* $p }" ;; esac ;;
	esac
done
for p in $g; do kill -KILL "-$p"; done 2>/dev/null`

// guard is a server's guard process: started with the first foreground command, told of
// each command's process group through a pipe only this process holds. One guard per server
// instead of one per command: a command costs a line on a pipe, not a fork and exec.
type guard struct {
	mu     sync.Mutex
	w      *os.File    // guarded by mu
	p      *os.Process // guarded by mu
	failed bool        // guarded by mu; no guard could start: commands run unguarded, as without Guard
}

// add tells the guard of a new foreground command's process group.
func (g *guard) add(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w == nil && !g.failed {
		g.start()
	}
	if g.w != nil {
		_, _ = g.w.WriteString("+" + strconv.Itoa(pgid) + "\n")
	}
}

// remove takes an ended command's group off the list (before its leader is reaped, so the
// group id cannot have been reused).
func (g *guard) remove(pgid int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.w != nil {
		_, _ = g.w.WriteString("-" + strconv.Itoa(pgid) + "\n")
	}
}

func (g *guard) start() {
	sh := "/bin/sh"
	if !isExecutable(sh) {
		g.failed = true
		return
	}
	r, w, err := os.Pipe()
	if err != nil {
		g.failed = true
		return
	}
	defer r.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		w.Close()
		g.failed = true
		return
	}
	defer null.Close()
	p, err := os.StartProcess(sh, []string{"sh", "-c", guardScript}, &os.ProcAttr{
		Dir: "/",
		// Nothing of the caller's environment: a command could read it in /proc.
		Env:   []string{"PATH=/usr/bin:/bin"},
		Files: []*os.File{null, null, null, r},
		// A group of its own: a command's group kill does not reach it.
		Sys: &syscall.SysProcAttr{Setpgid: true},
	})
	if err != nil {
		w.Close()
		g.failed = true
		return
	}
	g.w, g.p = w, p
}

// close ends the guard (the commands it guarded have ended) and reaps it.
func (g *guard) close() {
	g.mu.Lock()
	w, p := g.w, g.p
	g.w, g.p = nil, nil
	g.mu.Unlock()
	if w != nil {
		w.Close()
		_, _ = p.Wait()
	}
}

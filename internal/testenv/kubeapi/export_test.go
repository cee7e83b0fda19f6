package kubeapi

// PIDs returns the process ids of etcd and the apiserver, for tests.
func PIDs(s *Server) []int {
	var pids []int
	for _, p := range s.procs {
		pids = append(pids, p.cmd.Process.Pid)
	}
	return pids
}

// Dir returns the server's temporary directory, for tests.
func Dir(s *Server) string { return s.dir }

// RemoveStale is removeStale, for tests.
var RemoveStale = removeStale

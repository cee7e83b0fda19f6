// Command egressget is a tiny static HTTP(S) client for the egress tests: it fetches a URL
// through the proxy named by HTTP_PROXY/HTTPS_PROXY (as pip or git would), following no
// redirects, and prints the body. HTTPS goes through CONNECT (busybox wget sends https
// URLs to a proxy as plain requests, so it cannot test that). -k skips certificate checks
// (the test servers' certificates name example.com); -H adds a request header. Without -k the
// server is checked against the system's trust, or SSL_CERT_FILE. A status other than 2xx prints the
// status and body on stderr and exits 1.
package main

import (
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"
)

func main() {
	insecure := flag.Bool("k", false, "do not check the server's certificate")
	var headers []string
	flag.Func("H", "a request header, NAME: VALUE (repeatable)", func(s string) error {
		if !strings.Contains(s, ":") {
			return fmt.Errorf("want NAME: VALUE, got %q", s)
		}
		headers = append(headers, s)
		return nil
	})
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: egressget [-k] URL")
		os.Exit(2)
	}
	c := &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{Proxy: http.ProxyFromEnvironment,
		TLSClientConfig: &tls.Config{InsecureSkipVerify: *insecure}}}
	req, err := http.NewRequest(http.MethodGet, flag.Arg(0), nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "egressget:", err)
		os.Exit(2)
	}
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := c.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "egressget:", err)
		os.Exit(1)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		fmt.Fprintln(os.Stderr, "egressget:", resp.Status)
		io.Copy(os.Stderr, resp.Body)
		os.Exit(1)
	}
	if _, err := io.Copy(os.Stdout, resp.Body); err != nil {
		fmt.Fprintln(os.Stderr, "egressget:", err)
		os.Exit(1)
	}
}

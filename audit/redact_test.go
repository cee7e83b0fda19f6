package audit

import "testing"

func TestNewRedactor(t *testing.T) {
	redact := NewRedactor([]string{"s3cr3t-value", "  padded-secret\n", "abc", "s3cr3t"})
	tests := []struct{ in, want string }{
		{"", ""},
		{"echo s3cr3t-value", "echo ***"},
		{"echo s3cr3t and s3cr3t-value", "echo *** and ***"},
		{"x=padded-secret", "x=***"},
		{"abc is too short to redact", "abc is too short to redact"},
		{"curl -H 'Authorization: Bearer eyJhbGciOi.J9x'", "curl -H 'Authorization: Bearer ***'"},
		{"authorization: token abc123", "authorization: token ***"},
		{"bearer abcdefghijklmnopqrstu", "bearer ***"},
		{"AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE aws s3 ls", "AWS_ACCESS_KEY_ID=*** aws s3 ls"},
		{"key AKIAIOSFODNN7EXAMPLE", "key ***"},
		{"git clone https://ghp_abcdefghijklmnopqrstuvwxyz0123@github.com/x", "git clone https://***@github.com/x"},
		{"gh auth --with-token github_pat_11ABCDEFG0123456789_abcdefghij", "gh auth --with-token ***"},
		{"OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuv", "OPENAI_API_KEY=***"},
		{"export K=sk-ant-api03-abcdefghijklmnop", "export K=***"},
		{"sk-short", "sk-short"},
		{"risk-assessment-framework-document", "risk-assessment-framework-document"},
		{"psql postgres://admin:hunter22@db:5432/app", "psql postgres://admin:***@db:5432/app"},
		{"curl https://host:8443/path@x", "curl https://host:8443/path@x"},
		{"curl 'https://api.example.com/v1?user=a&password=letmein&x=1'", "curl 'https://api.example.com/v1?user=a&password=***&x=1'"},
		{"mysql --password=letmein -u root", "mysql --password=*** -u root"},
		{`DB_PASSWORD="two words" ./run`, "DB_PASSWORD=*** ./run"},
		{"cd $(pwd)", "cd $(pwd)"},
		{"-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n-----END OPENSSH PRIVATE KEY-----\nok",
			"-----BEGIN OPENSSH PRIVATE KEY-----***-----END OPENSSH PRIVATE KEY-----\nok"},
		{"cat key\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow", "cat key\n-----BEGIN RSA PRIVATE KEY-----***"},
		{"ls -la /workspace", "ls -la /workspace"},
	}
	for _, tt := range tests {
		if got := redact(tt.in); got != tt.want {
			t.Errorf("redact(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
}

func TestNewRedactorNoSecrets(t *testing.T) {
	redact := NewRedactor(nil)
	if got := redact("echo hello"); got != "echo hello" {
		t.Errorf("redact(%q) = %q; want it unchanged", "echo hello", got)
	}
	if got := redact("token=abcd"); got != "token=***" {
		t.Errorf("redact(%q) = %q; want %q", "token=abcd", got, "token=***")
	}
}

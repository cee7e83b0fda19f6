//go:build linux

package loopdisk

import (
	"strings"
	"testing"
)

// TestMountOf: the mount holding a path is the last one on its longest mount point, with its
// propagation fields; escaped mount points compare unescaped.
func TestMountOf(t *testing.T) {
	table := `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
30 22 8:1 /var/lib /var/lib rw master:7 - ext4 /dev/sda1 rw
31 22 0:5 / /var/lib/hermes rw shared:9 - tmpfs tmpfs rw
32 31 0:6 / /var/lib/hermes rw - tmpfs tmpfs rw
33 22 0:7 / /srv/a\040b rw shared:4 - tmpfs tmpfs rw
`
	for _, c := range []struct {
		path, point string
		tags        []string
	}{
		{"/var/lib/hermes/disks", "/var/lib/hermes", nil},
		{"/var/lib/hermesx", "/var/lib", []string{"master:7"}},
		{"/etc", "/", []string{"shared:1"}},
		{"/srv/a b/c", "/srv/a b", []string{"shared:4"}},
	} {
		point, tags := mountOf(table, c.path)
		if point != c.point || strings.Join(tags, ",") != strings.Join(c.tags, ",") {
			t.Errorf("mountOf(%q) = %q, %q; want %q, %q", c.path, point, tags, c.point, c.tags)
		}
	}
}

package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"
)

const (
	configHeader  = "hermes-sandbox configuration: edit by hand or with `hermes-sandbox config set KEY VALUE`.\nValid keys: `hermes-sandbox config list`. Credentials go in secrets.yaml beside this file."
	secretsHeader = "hermes-sandbox credentials. Keep this file private (chmod 600).\nEdit with `hermes-sandbox config set KEY VALUE`."
)

// Set stores key = value in the config file at path ("" = DefaultPath), or
// in the secrets file beside it when key is a secret. key is section.key or
// the alias "sandbox" (terminal.backend). Lists accept a,b,c or [a, b];
// maps accept K=V,K2=V2 or {K: V}.
//
// The value is parsed into its typed field and the resulting configuration
// (defaults + files, without env) is validated before anything is written;
// on any error the file is left unchanged. The file is edited as a YAML
// node tree, so comments and other keys survive, and written atomically
// with mode 0600 (its directory is created 0700 if missing).
func Set(path, key, value string) error {
	if path == "" {
		path = DefaultPath()
	}
	f, err := resolveKey(key)
	if err != nil {
		return &Error{Op: "set config", Key: key, Err: err}
	}
	v, err := parseString(f, value)
	if err != nil {
		return &Error{Op: "set config", Key: f.key, Err: fmt.Errorf("%s: %w", f.key, err)}
	}
	target := path
	if f.secret() {
		target = SecretsPathFor(path)
	}
	doc, _, err := readDoc(target, f.secret())
	if err != nil {
		return err
	}
	if f.secret() {
		// Secrets have no cross-field rules; still refuse to edit a
		// secrets file that does not decode.
		if err := NewConfig().decodeRoot(target, doc, true); err != nil {
			return err
		}
	} else {
		c, err := loadFiles(path, false)
		if err != nil {
			return err
		}
		c.fieldValue(f).Set(v)
		c.setOrigin(f.key, origin{source: SourceFile})
		if errs := c.validate(); len(errs) > 0 {
			for _, e := range errs {
				e.Op = "set config"
				c.locate(e)
			}
			return joinErrors(errs)
		}
	}
	if doc == nil {
		doc = newDoc(f.secret())
	}
	if err := setNode(doc.Content[0], f, valueNode(f, v)); err != nil {
		return &Error{Op: "set config", File: target, Key: f.key, Err: err}
	}
	return writeDoc(target, doc)
}

// Unset removes key from the config file at path ("" = DefaultPath), or
// from the secrets file for a secret key, so its default applies again.
// Unsetting a key that is not in the file is not an error; a missing file
// is left missing. Unsetting terminal.backend also removes the sandbox alias.
func Unset(path, key string) error {
	if path == "" {
		path = DefaultPath()
	}
	f, err := resolveKey(key)
	if err != nil {
		return &Error{Op: "unset config", Key: key, Err: err}
	}
	target := path
	if f.secret() {
		target = SecretsPathFor(path)
	}
	doc, found, err := readDoc(target, f.secret())
	if err != nil || !found {
		return err
	}
	root := doc.Content[0]
	changed := false
	if f.key == aliasedTo {
		changed = removeKey(root, aliasKey)
	}
	if i := mappingIndex(root, f.section); i >= 0 {
		sect := deref(root.Content[i+1])
		if sect.Kind == yaml.MappingNode && removeKey(sect, f.name) {
			changed = true
			k := root.Content[i]
			if len(sect.Content) == 0 && k.HeadComment == "" && k.LineComment == "" && k.FootComment == "" &&
				sect.HeadComment == "" && sect.LineComment == "" && sect.FootComment == "" {
				root.Content = append(root.Content[:i], root.Content[i+2:]...)
			}
		}
	}
	if !changed {
		return nil
	}
	return writeDoc(target, doc)
}

func newDoc(secrets bool) *yaml.Node {
	header := configHeader
	if secrets {
		header = secretsHeader
	}
	return &yaml.Node{Kind: yaml.DocumentNode, HeadComment: header,
		Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
}

// setNode puts value at f in the root mapping, creating the section if
// needed and keeping the comments of a value it replaces.
func setNode(root *yaml.Node, f *field, value *yaml.Node) error {
	if f.key == aliasedTo {
		if i := mappingIndex(root, aliasKey); i >= 0 {
			replaceValue(root, i+1, value)
			return nil
		}
	}
	var sect *yaml.Node
	if i := mappingIndex(root, f.section); i >= 0 {
		sect = deref(root.Content[i+1])
		if isNull(sect) {
			m := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			replaceValue(root, i+1, m)
			sect = m
		}
	} else {
		sect = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		root.Content = append(root.Content, strNode(f.section), sect)
	}
	if sect.Kind != yaml.MappingNode {
		return fmt.Errorf("section %s in the file is not a mapping; fix it by hand", f.section)
	}
	if i := mappingIndex(sect, f.name); i >= 0 {
		replaceValue(sect, i+1, value)
	} else {
		sect.Content = append(sect.Content, strNode(f.name), value)
	}
	return nil
}

func replaceValue(m *yaml.Node, i int, value *yaml.Node) {
	old := m.Content[i]
	value.HeadComment, value.LineComment, value.FootComment = old.HeadComment, old.LineComment, old.FootComment
	m.Content[i] = value
}

func removeKey(m *yaml.Node, key string) bool {
	i := mappingIndex(m, key)
	if i < 0 {
		return false
	}
	m.Content = append(m.Content[:i], m.Content[i+2:]...)
	return true
}

func writeDoc(path string, doc *yaml.Node) error {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("write config %s: %w", path, err)
	}
	if err := enc.Close(); err != nil {
		return fmt.Errorf("write config %s: %w", path, err)
	}
	return writeFileAtomic(path, buf.Bytes())
}

// writeFileAtomic writes data to a temp file in path's directory with mode
// 0600 and renames it over path. A symlink at path is followed, so the
// link survives and its target is replaced.
func writeFileAtomic(path string, data []byte) (err error) {
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write config %s: %w", path, err)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write config %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return fmt.Errorf("write config %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("write config %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write config %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write config %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write config %s: %w", path, err)
	}
	return nil
}

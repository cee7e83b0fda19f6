package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

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
	return SetMany(path, []KV{{Key: key, Value: value}})
}

// SetMany is Set for several keys at once: every value is parsed and the resulting
// configuration validated before anything is written, so either all of them are stored or
// none is. Each file (config, secrets) is written once.
func SetMany(path string, kvs []KV) error { return setMany(path, kvs, true) }

// CheckMany is SetMany without the writing: the error SetMany would return, or nil.
func CheckMany(path string, kvs []KV) error { return setMany(path, kvs, false) }

func setMany(path string, kvs []KV, write bool) error {
	if path == "" {
		path = DefaultPath()
	}
	type item struct {
		f *field
		v reflect.Value
	}
	var items []item
	for _, kv := range kvs {
		key, value, err := resolveAlias(kv.Key, kv.Value)
		if err != nil {
			return &Error{Op: "set config", Key: key, Err: err}
		}
		f, err := resolveKey(key)
		if err != nil {
			return &Error{Op: "set config", Key: key, Err: err}
		}
		v, err := parseString(f, value)
		if err != nil {
			return &Error{Op: "set config", Key: f.key, Err: fmt.Errorf("%s: %w", f.key, err)}
		}
		items = append(items, item{f, v})
	}
	c, err := loadFiles(path, false)
	if err != nil {
		return err
	}
	docs := map[bool]*yaml.Node{}
	for _, secret := range []bool{false, true} {
		target := targetFile(path, secret)
		doc, _, err := readDoc(target, secret)
		if err != nil {
			return err
		}
		if secret && doc != nil {
			// Secrets have no cross-field rules; still refuse to edit a secrets file that
			// does not decode.
			if err := NewConfig().decodeRoot(target, doc, true); err != nil {
				return err
			}
		}
		docs[secret] = doc
	}
	touched := map[bool]bool{}
	for _, it := range items {
		if !it.f.secret() {
			c.fieldValue(it.f).Set(it.v)
			c.setOrigin(it.f.key, origin{source: SourceFile})
		}
		touched[it.f.secret()] = true
	}
	if errs := c.validate(); len(errs) > 0 {
		for _, e := range errs {
			e.Op = "set config"
			c.locate(e)
		}
		return joinErrors(errs)
	}
	if !write {
		return nil
	}
	for _, it := range items {
		secret := it.f.secret()
		if docs[secret] == nil {
			docs[secret] = newDoc(secret)
		}
		if err := setNode(docs[secret].Content[0], it.f, valueNode(it.f, it.v)); err != nil {
			return &Error{Op: "set config", File: targetFile(path, secret), Key: it.f.key, Err: err}
		}
	}
	// Secrets first: a config that names a backend whose credentials were not stored would
	// be the worse half-state.
	for _, secret := range []bool{true, false} {
		if touched[secret] {
			if err := writeDoc(targetFile(path, secret), docs[secret]); err != nil {
				return err
			}
		}
	}
	return nil
}

// targetFile is the file a key lives in: the config file, or secrets.yaml beside it.
func targetFile(path string, secret bool) string {
	if secret {
		return SecretsPathFor(path)
	}
	return path
}

// Unset removes key from the config file at path ("" = DefaultPath), or
// from the secrets file for a secret key, so its default applies again.
// Unsetting a key that is not in the file is not an error; a missing file
// is left missing. Unsetting terminal.backend also removes the sandbox alias.
func Unset(path, key string) error {
	_, err := UnsetKey(path, key)
	return err
}

// UnsetKey is Unset that also reports whether the file held the key (and so changed).
func UnsetKey(path, key string) (bool, error) {
	if path == "" {
		path = DefaultPath()
	}
	f, err := resolveKey(key)
	if err != nil {
		return false, &Error{Op: "unset config", Key: key, Err: err}
	}
	target := path
	if f.secret() {
		target = SecretsPathFor(path)
	}
	doc, found, err := readDoc(target, f.secret())
	if err != nil || !found {
		return false, err
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
		return false, nil
	}
	return true, writeDoc(target, doc)
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

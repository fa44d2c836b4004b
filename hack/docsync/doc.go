// Package docsync keeps the operators' pages true to the code: the tables
// of keys and values that the schema generates (tables.go), and the facts
// that several pages mention but one page states (facts.go), and what the
// operators' pages must leave to docs/dev (operator.go). Its tests fail
// when a page is stale; UPDATE=1 rewrites the generated tables:
//
//	UPDATE=1 go test ./hack/docsync
package docsync

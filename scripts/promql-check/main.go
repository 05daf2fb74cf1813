// promql-check parses PromQL expressions with Prometheus's own parser (promql/parser), so that a query the
// package renders that Prometheus would refuse fails the tests instead of a dashboard or an autoscaler.
//
// Input, on stdin: one JSON string per line, each an expression. Output, on stdout: one JSON object per input
// line, {"query": ..., "type": "vector"|"scalar"|"matrix"|"string", "error": ""}, with error set and type empty
// when the expression does not parse. Exit status: 0 when every line was read (whatever the verdicts), 2 when the
// input is not JSON strings.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"

	"github.com/prometheus/prometheus/promql/parser"
)

type verdict struct {
	Query string `json:"query"`
	Type  string `json:"type"`
	Error string `json:"error"`
}

func main() {
	// The default options: the functions and syntax a stock Prometheus server accepts.
	p := parser.NewParser(parser.Options{})
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<24)
	out := json.NewEncoder(os.Stdout)
	line := 0
	for in.Scan() {
		line++
		var query string
		if err := json.Unmarshal(in.Bytes(), &query); err != nil {
			fmt.Fprintf(os.Stderr, "promql-check: line %d is not a JSON string: %v\n", line, err)
			os.Exit(2)
		}
		v := verdict{Query: query}
		expr, err := p.ParseExpr(query)
		if err != nil {
			v.Error = err.Error()
		} else {
			v.Type = string(expr.Type())
		}
		if err := out.Encode(v); err != nil {
			fmt.Fprintf(os.Stderr, "promql-check: %v\n", err)
			os.Exit(2)
		}
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "promql-check: reading stdin: %v\n", err)
		os.Exit(2)
	}
}

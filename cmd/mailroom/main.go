// Command mailroom is a typed mailbox for AI agents, served over MCP.
//
//	mailroom serve [--db PATH] [--agent NAME]            MCP over stdio
//	mailroom serve --http 127.0.0.1:8787 [--db PATH]     MCP over streamable HTTP at /mcp
//	mailroom token create --agent NAME | --human LOGIN    print a bearer token
//	mailroom identity add NAME [--human] | identity list
//	mailroom role grant NAME ROLE | role revoke NAME ROLE | role list
//
// `mailroom help` lists every command; `mailroom help COMMAND` or
// `mailroom COMMAND --help` explains one.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	m := NewMain(os.Stdout, os.Stderr, os.Getenv)
	m.Stdin = os.Stdin
	err := m.ParseFlags(os.Args[1:])
	if err == nil {
		err = m.Run(ctx)
	}
	m.Close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mailroom:", oneLine(err))
		os.Exit(1)
	}
}

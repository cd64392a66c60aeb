package mcp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxStdioLine bounds one line of JSON-RPC on stdio (the go-sdk's own
// default); a longer line is answered with a parse error and skipped.
const MaxStdioLine = 16 << 20

// JSON-RPC error codes of a line the server cannot take.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// ServeStdio serves s over stdin/stdout until the client disconnects or ctx
// ends.
func (s *Server) ServeStdio(ctx context.Context) error {
	return s.ServeLines(ctx, os.Stdin, os.Stdout)
}

// ServeLines serves s over newline-delimited JSON-RPC on in and out. The
// go-sdk's stdio connection ends at the first line it cannot decode, so
// lines pass through LineFilter first: a malformed one is answered with a
// JSON-RPC error and the session goes on. The go-sdk has no option for this;
// hence the wrapper.
func (s *Server) ServeLines(ctx context.Context, in io.Reader, out io.Writer) error {
	w := &lockedWriter{w: out}
	pr, pw := io.Pipe()
	go func() {
		err := LineFilter(in, pw, w, MaxStdioLine)
		pw.CloseWithError(err) // nil: EOF, the client has gone
	}()
	t := &gomcp.IOTransport{Reader: pr, Writer: w, MaxLineLength: MaxStdioLine + 1}
	err := s.MCPServer().Run(ctx, t)
	pr.Close()
	return err
}

// LineFilter copies each line of in that is one JSON-RPC message to pass
// (trimmed, newline-terminated) and answers every other non-blank line on
// reply with a JSON-RPC error whose id is null: -32700 for a line that is
// not JSON or is longer than max bytes, -32600 for JSON that is not a
// JSON-RPC message (batches included: MCP dropped them in 2025-06-18, and
// the go-sdk ends the session on one). It returns nil at the end of in.
func LineFilter(in io.Reader, pass, reply io.Writer, max int) error {
	br := bufio.NewReaderSize(in, 64<<10)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		n := len(line) + len(chunk)
		if bytes.HasSuffix(chunk, []byte("\n")) {
			n--
		}
		tooLong := n > max
		if !tooLong {
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) && !tooLong {
			continue
		}
		if tooLong {
			// Skip to the end of the line without keeping it.
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			line = line[:0]
			if werr := writeRPCError(reply, codeParseError, fmt.Sprintf("Parse error: line longer than %d bytes", max)); werr != nil {
				return werr
			}
		} else if msg := bytes.TrimSpace(line); len(msg) > 0 {
			if code, why := checkLine(msg); code != 0 {
				if werr := writeRPCError(reply, code, why); werr != nil {
					return werr
				}
			} else if _, werr := pass.Write(append(msg, '\n')); werr != nil {
				return werr
			}
		}
		line = line[:0]
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// checkLine returns 0 for a line the go-sdk will take, else the error code
// and message to answer it with.
func checkLine(msg []byte) (int, string) {
	if !json.Valid(msg) {
		return codeParseError, "Parse error: the line is not valid JSON"
	}
	if msg[0] == '[' {
		return codeInvalidRequest, "Invalid Request: JSON-RPC batches are not supported; send one message per line"
	}
	if _, err := jsonrpc.DecodeMessage(msg); err != nil {
		return codeInvalidRequest, "Invalid Request: not a JSON-RPC 2.0 message"
	}
	return 0, ""
}

func writeRPCError(w io.Writer, code int, message string) error {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": nil, "error": map[string]any{"code": code, "message": message}})
	_, err := w.Write(append(b, '\n'))
	return err
}

// lockedWriter serialises whole-line writes from the go-sdk and the filter.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return nil }

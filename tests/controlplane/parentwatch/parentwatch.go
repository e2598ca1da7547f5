// Package parentwatch ends the process when the test harness that started it goes away.
package parentwatch

import (
	"io"
	"os"
)

// ExitOnStdinEOF exits the process once stdin reaches EOF, when
// CAPWASM_EXIT_ON_STDIN_EOF=1. The harness holds the write end of the pipe;
// the kernel closes it when the harness exits, panics or is killed.
func ExitOnStdinEOF() {
	if os.Getenv("CAPWASM_EXIT_ON_STDIN_EOF") != "1" {
		return
	}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}()
}

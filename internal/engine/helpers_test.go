package engine_test

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/lambdasaga/lambdasaga/internal/sagatest"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

var (
	mustCompile     = sagatest.MustCompile
	mustCompileOpts = sagatest.MustCompileWith
	mustCompileFile = sagatest.MustCompileFile
	decodeInput     = sagatest.DecodeInput
	orderIn         = sagatest.OrderInput
)

func join(xs []string) string { return strings.Join(xs, " ") }

func equalValues(a, b any) bool { return fmt.Sprintf("%#v", a) == fmt.Sprintf("%#v", b) }

var osReadFile = os.ReadFile

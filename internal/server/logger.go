package server

import (
	"fmt"
	"io"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// NewLogger returns a JSON logger on w at level info or debug (V(1)). It
// does not sample: at debug every admission decision gets its line.
func NewLogger(level string, w io.Writer) (logr.Logger, error) {
	var lvl zapcore.Level
	switch level {
	case "info":
		lvl = zapcore.InfoLevel
	case "debug":
		lvl = zapcore.DebugLevel
	default:
		return logr.Logger{}, fmt.Errorf("%q: must be info or debug", level)
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.RFC3339NanoTimeEncoder
	// Locked: w may be any writer (a command's stderr), and logs come from
	// many goroutines.
	ws := zapcore.Lock(zapcore.AddSync(w))
	return zapr.NewLogger(zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(enc), ws, lvl), zap.ErrorOutput(ws))), nil
}

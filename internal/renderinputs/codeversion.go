package renderinputs

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"runtime/debug"
	"sync"
)

// CodeVersion identifies the code that renders: a digest of the running executable, which holds
// Helm's template engine, the post-renderers and everything else that turns chart and values
// into a manifest. A new build of the operator changes it, so every release is checked once
// against the new code; nobody has to remember to bump a constant.
//
// When the executable cannot be read, the build information (module versions and sums, build
// settings) stands in.
var CodeVersion = sync.OnceValue(func() string {
	h := sha256.New()
	if exe, err := os.Executable(); err == nil {
		if f, err := os.Open(exe); err == nil {
			_, err = io.Copy(h, f)
			_ = f.Close()
			if err == nil {
				return hex.EncodeToString(h.Sum(nil))[:32]
			}
			h.Reset()
		}
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		_, _ = io.WriteString(h, info.String())
	}
	return hex.EncodeToString(h.Sum(nil))[:32]
})

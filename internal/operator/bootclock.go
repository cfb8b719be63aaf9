package operator

import (
	"time"

	"golang.org/x/sys/unix"
)

// BootClock returns the time since boot, suspends included (CLOCK_BOOTTIME).
func BootClock() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		// Linux has had CLOCK_BOOTTIME since 2.6.39; keep time moving rather than freeze the fence open.
		return time.Duration(time.Now().UnixNano())
	}
	return time.Duration(ts.Nano())
}

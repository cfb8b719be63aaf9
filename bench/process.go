package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat (100 on Linux).
const clockTicks = 100

// operatorProcess is one operator under measurement.
type operatorProcess struct {
	cmd  *exec.Cmd
	done chan struct{}
	log  string
}

func startProcess(dir, logPath string, env []string, bin string, args ...string) (*operatorProcess, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// An operator must not outlive an interrupted benchmark: it would act on the next cluster.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, err
	}
	p := &operatorProcess{cmd: cmd, done: make(chan struct{}), log: logPath}
	go func() { _ = cmd.Wait(); logFile.Close(); close(p.done) }()
	return p, nil
}

// waitHealthy polls the process's health endpoint until it answers.
func (p *operatorProcess) waitHealthy(addr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited; see %s", filepath.Base(p.cmd.Path), p.log)
		default:
		}
		if resp, err := http.Get("http://" + addr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("%s not ready after %s; see %s", filepath.Base(p.cmd.Path), timeout, p.log)
}

func (p *operatorProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(40 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// usage is what the kernel accounts to a process so far.
type usage struct {
	CPUSeconds float64 // user + system
	RSSBytes   int64   // resident now
	PeakBytes  int64   // resident high-water mark
}

func (p *operatorProcess) usage() (usage, error) { return readUsage(p.cmd.Process.Pid) }

func readUsage(pid int) (usage, error) {
	var u usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, err
	}
	if u.CPUSeconds, err = cpuSeconds(stat); err != nil {
		return u, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kib, _ := strconv.ParseInt(fields[1], 10, 64)
		switch fields[0] {
		case "VmRSS:":
			u.RSSBytes = kib << 10
		case "VmHWM:":
			u.PeakBytes = kib << 10
		}
	}
	return u, nil
}

// cpuSeconds reads utime+stime from the contents of /proc/PID/stat. The command name (field 2)
// may hold spaces, so fields are counted from the closing parenthesis.
func cpuSeconds(stat []byte) (float64, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat: %q", stat)
	}
	fields := strings.Fields(string(stat[i+1:]))
	// fields[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(fields) < 13 {
		return 0, fmt.Errorf("malformed stat: %q", stat)
	}
	utime, err1 := strconv.ParseFloat(fields[11], 64)
	stime, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed stat: %q", stat)
	}
	return (utime + stime) / clockTicks, nil
}

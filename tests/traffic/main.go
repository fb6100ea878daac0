// SPDX-License-Identifier: GPL-2.0-or-later

// Command traffic sends and measures test traffic between pods:
//
//	traffic udp-send -to IP:PORT [-size 1400] [-duration 5s] [-mbps 0]
//	traffic udp-sink -listen :PORT -duration 10s
//	traffic rr-server -listen :PORT
//	traffic rr-client -to IP:PORT [-rate 100] [-duration 10s]
//	traffic tcp-sink -listen :PORT -duration 10s
//	traffic tcp-send -to IP:PORT [-duration 5s]
//
// udp-send sends datagrams of -size bytes for -duration (paced to -mbps,
// or as fast as it can with 0) and prints "sent BYTES bytes in SECS s",
// then "blocked: ..." when its last write waited more than a second for
// room in the socket's buffer (a device that stopped sending).
// udp-sink counts what arrives until -duration has passed since the first
// datagram and prints "received BYTES bytes in SECS s".  rr-server echoes
// every datagram; rr-client sends -rate requests per second for -duration
// and prints the round-trip times' percentiles in microseconds
// ("rr sent N lost L p50 X p99 Y max Z").  tcp-send writes one TCP stream
// for -duration; tcp-sink accepts one and prints what it received, as
// udp-sink does.  Every wait has a deadline.
package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"time"
)

func fail(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "traffic: "+format+"\n", a...)
	os.Exit(1)
}

func udpSend(to string, size int, d time.Duration, mbps float64) {
	c, err := net.Dial("udp", to)
	if err != nil {
		fail("%v", err)
	}
	buf := make([]byte, size)
	var sent int64
	start := time.Now()
	// A socket whose device has stopped sending blocks its writer once the
	// socket's buffer is full: the stream still ends at its duration, and
	// says that it was blocked.
	if err := c.SetWriteDeadline(start.Add(d)); err != nil {
		fail("%v", err)
	}
	blocked := false
	for time.Since(start) < d {
		if mbps > 0 {
			due := start.Add(time.Duration(float64(sent*8) / (mbps * 1e6) * float64(time.Second)))
			if w := time.Until(due); w > 0 {
				time.Sleep(w)
			}
		}
		t := time.Now()
		n, err := c.Write(buf)
		if err == nil {
			sent += int64(n)
		} else if errors.Is(err, os.ErrDeadlineExceeded) {
			blocked = time.Since(t) > time.Second
			break
		}
	}
	fmt.Printf("sent %d bytes in %.3f s\n", sent, time.Since(start).Seconds())
	if blocked {
		fmt.Println("blocked: the last write waited until the end")
	}
}

func udpSink(listen string, d time.Duration) {
	c, err := net.ListenPacket("udp", listen)
	if err != nil {
		fail("%v", err)
	}
	buf := make([]byte, 65536)
	var got int64
	var first time.Time
	deadline := time.Now().Add(d + 60*time.Second)
	for {
		if !first.IsZero() {
			deadline = first.Add(d)
		}
		if err := c.SetReadDeadline(deadline); err != nil {
			fail("%v", err)
		}
		n, _, err := c.ReadFrom(buf)
		if err != nil {
			break
		}
		if first.IsZero() {
			first = time.Now()
		}
		got += int64(n)
	}
	secs := 0.0
	if !first.IsZero() {
		secs = time.Since(first).Seconds()
	}
	fmt.Printf("received %d bytes in %.3f s\n", got, secs)
}

func tcpSend(to string, d time.Duration) {
	c, err := net.DialTimeout("tcp", to, 30*time.Second)
	if err != nil {
		fail("%v", err)
	}
	buf := make([]byte, 65536)
	var sent int64
	start := time.Now()
	for time.Since(start) < d {
		_ = c.SetWriteDeadline(start.Add(d + 30*time.Second))
		n, err := c.Write(buf)
		sent += int64(n)
		if err != nil {
			break
		}
	}
	_ = c.Close()
	fmt.Printf("sent %d bytes in %.3f s\n", sent, time.Since(start).Seconds())
}

func tcpSink(listen string, d time.Duration) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		fail("%v", err)
	}
	_ = l.(*net.TCPListener).SetDeadline(time.Now().Add(d + 60*time.Second))
	c, err := l.Accept()
	if err != nil {
		fail("%v", err)
	}
	buf := make([]byte, 65536)
	var got int64
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(d + 30*time.Second))
	for {
		n, err := c.Read(buf)
		got += int64(n)
		if err != nil {
			break
		}
	}
	fmt.Printf("received %d bytes in %.3f s\n", got, time.Since(start).Seconds())
}

func rrServer(listen string) {
	c, err := net.ListenPacket("udp", listen)
	if err != nil {
		fail("%v", err)
	}
	buf := make([]byte, 2048)
	for {
		n, from, err := c.ReadFrom(buf)
		if err != nil {
			fail("%v", err)
		}
		_, _ = c.WriteTo(buf[:n], from)
	}
}

func rrClient(to string, rate int, d time.Duration) {
	c, err := net.Dial("udp", to)
	if err != nil {
		fail("%v", err)
	}
	interval := time.Second / time.Duration(rate)
	total := int(d / interval)
	var rtts []time.Duration
	buf := make([]byte, 64)
	reply := make([]byte, 2048)
	start := time.Now()
	for i := 0; i < total; i++ {
		if w := time.Until(start.Add(time.Duration(i) * interval)); w > 0 {
			time.Sleep(w)
		}
		buf[0], buf[1], buf[2], buf[3] = byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
		t := time.Now()
		// (a request that cannot leave within a second counts as lost)
		_ = c.SetWriteDeadline(t.Add(time.Second))
		if _, err := c.Write(buf); err != nil {
			continue
		}
		// A reply that takes longer than a second counts as lost.
		_ = c.SetReadDeadline(t.Add(time.Second))
		for {
			n, err := c.Read(reply)
			if err != nil {
				break
			}
			if n >= 4 && reply[0] == buf[0] && reply[1] == buf[1] && reply[2] == buf[2] &&
				reply[3] == buf[3] {
				rtts = append(rtts, time.Since(t))
				break
			}
		}
	}
	sort.Slice(rtts, func(a, b int) bool { return rtts[a] < rtts[b] })
	pct := func(p float64) int64 {
		if len(rtts) == 0 {
			return -1
		}
		return rtts[int(p*float64(len(rtts)-1))].Microseconds()
	}
	fmt.Printf("rr sent %d lost %d p50 %d p99 %d max %d\n", total, total-len(rtts),
		pct(0.5), pct(0.99), pct(1))
}

func main() {
	if len(os.Args) < 2 {
		fail("usage: traffic udp-send|udp-sink|tcp-send|tcp-sink|rr-server|rr-client [options]")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	to := fs.String("to", "", "IP:PORT to send to")
	listen := fs.String("listen", ":9000", "address to listen on")
	size := fs.Int("size", 1400, "datagram size")
	d := fs.Duration("duration", 5*time.Second, "how long")
	mbps := fs.Float64("mbps", 0, "send rate in Mbit/s (0: as fast as possible)")
	rate := fs.Int("rate", 100, "requests per second")
	_ = fs.Parse(os.Args[2:])
	switch os.Args[1] {
	case "udp-send":
		udpSend(*to, *size, *d, *mbps)
	case "udp-sink":
		udpSink(*listen, *d)
	case "tcp-send":
		tcpSend(*to, *d)
	case "tcp-sink":
		tcpSink(*listen, *d)
	case "rr-server":
		rrServer(*listen)
	case "rr-client":
		if *rate <= 0 {
			fail("-rate must be positive")
		}
		rrClient(*to, *rate, *d)
	default:
		fail("unknown command %q", os.Args[1])
	}
}

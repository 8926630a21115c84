package runtimetest

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// program is what a container does once started, read from its command and
// arguments: run for d, then exit with code; or run until stopped.
type program struct {
	forever bool
	d       time.Duration
	code    int32
}

// maxSleep caps one sleep so that summing them cannot overflow; anything
// this long is, for a test, forever.
const maxSleep = 100 * 365 * 24 * time.Hour

// parseProgram interprets command and args as a tiny shell script; see the
// package documentation for the language.
func parseProgram(command, args []string) program {
	words := make([]string, 0, len(command)+len(args))
	words = append(words, command...)
	words = append(words, args...)
	script := strings.Join(words, " ")

	var (
		p          program
		recognised bool
		last       int32 // status of the last recognised command
	)
	for _, stmt := range splitStatements(script) {
		fields := stripWrappers(strings.Fields(stmt))
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "while", "until", "for":
			// Loops are not interpreted: a script with one runs until stopped.
			return program{forever: true}
		case "sleep":
			if len(fields) < 2 {
				continue
			}
			d, ok := parseSleep(fields[1])
			if !ok {
				continue
			}
			recognised = true
			if d < 0 {
				return program{forever: true}
			}
			p.d += d
			if p.d >= maxSleep {
				return program{forever: true}
			}
			last = 0
		case "exit":
			recognised = true
			code := last
			if len(fields) > 1 {
				n, err := strconv.ParseInt(fields[1], 10, 64)
				if err != nil {
					code = 2 // sh: exit: Illegal number
				} else {
					code = int32(n & 0xff)
				}
			}
			p.code = code
			return p
		case "true":
			recognised = true
			last = 0
		case "false":
			recognised = true
			last = 1
		default:
			// Any other command (echo, the image's own entrypoint) takes no
			// time and succeeds.
			last = 0
		}
	}
	if !recognised {
		return program{forever: true}
	}
	p.code = last
	return p
}

// splitStatements splits a script on ';', '&&', '||' and newlines.
func splitStatements(script string) []string {
	return strings.FieldsFunc(strings.NewReplacer("&&", ";", "||", ";", "\n", ";").Replace(script), func(r rune) bool {
		return r == ';'
	})
}

// stripWrappers removes the words that only hand the rest of the statement
// to a shell: "sh -c", "/bin/bash -ec", "exec", "do", "then", quotes.
func stripWrappers(fields []string) []string {
	for i := range fields {
		fields[i] = strings.Trim(fields[i], `'"()`)
	}
	for len(fields) > 0 {
		switch base(fields[0]) {
		case "sh", "bash", "ash", "dash", "zsh", "busybox", "env":
			fields = fields[1:]
			for len(fields) > 0 && strings.HasPrefix(fields[0], "-") {
				fields = fields[1:]
			}
		case "exec", "do", "then", "else", "{", "":
			fields = fields[1:]
		default:
			return fields
		}
	}
	return fields
}

func base(word string) string {
	if i := strings.LastIndexByte(word, '/'); i >= 0 {
		return word[i+1:]
	}
	return word
}

// parseSleep reads busybox sleep's argument: seconds, possibly fractional,
// with an optional s, m, h or d suffix, or "infinity" (reported as -1).
func parseSleep(arg string) (time.Duration, bool) {
	if arg == "infinity" || arg == "inf" {
		return -1, true
	}
	unit := time.Second
	switch {
	case strings.HasSuffix(arg, "s"):
		arg = arg[:len(arg)-1]
	case strings.HasSuffix(arg, "m"):
		unit, arg = time.Minute, arg[:len(arg)-1]
	case strings.HasSuffix(arg, "h"):
		unit, arg = time.Hour, arg[:len(arg)-1]
	case strings.HasSuffix(arg, "d"):
		unit, arg = 24*time.Hour, arg[:len(arg)-1]
	}
	f, err := strconv.ParseFloat(arg, 64)
	if err != nil || f < 0 || math.IsNaN(f) {
		return 0, false
	}
	if math.IsInf(f, 1) || f*float64(unit) >= float64(maxSleep) {
		return -1, true
	}
	return time.Duration(f * float64(unit)), true
}

package config

import (
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The kinds of value a setting holds: each parses, shows and checks its
// field, so that a value means the same whether it comes from the
// environment or a flag, and a rule is written once.

func boolValue(p func(*Config) *bool) value {
	return value{
		set: func(c *Config, v string) error {
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("want true or false, got %q", v)
			}
			*p(c) = b
			return nil
		},
		get:     func(c *Config) string { return strconv.FormatBool(*p(c)) },
		boolean: true,
	}
}

// intRule says what is wrong with n, or "".
type intRule func(n int) string

// between allows lo to hi; unit follows the numbers in the message.
func between(lo, hi int, unit string) intRule {
	return func(n int) string {
		if n < lo || n > hi {
			return fmt.Sprintf("want %d to %d%s, got %d", lo, hi, unit, n)
		}
		return ""
	}
}

func atLeast(lo int) intRule {
	return func(n int) string {
		if n < lo {
			return fmt.Sprintf("want at least %d, got %d", lo, n)
		}
		return ""
	}
}

// intValue is a whole number; rule, if not nil, checks it.
func intValue(p func(*Config) *int, rule intRule) value {
	v := value{
		set: func(c *Config, v string) error {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("want a whole number, got %q", v)
			}
			*p(c) = n
			return nil
		},
		get: func(c *Config) string { return strconv.Itoa(*p(c)) },
	}
	if rule != nil {
		v.check = func(c *Config) []string { return problem(rule(*p(c))) }
	}
	return v
}

// msValue is a timeout in milliseconds, above 0.
func msValue(p func(*Config) *time.Duration) value {
	return value{
		set: func(c *Config, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n <= 0 {
				return fmt.Errorf("want a positive number of milliseconds, got %q", v)
			}
			*p(c) = time.Duration(n) * time.Millisecond
			return nil
		},
		get: func(c *Config) string { return strconv.FormatInt(p(c).Milliseconds(), 10) },
		check: func(c *Config) []string {
			if *p(c) <= 0 {
				return problem("must be above 0")
			}
			return nil
		},
	}
}

// durationValue is a Go duration ("5m", "90s") or bare seconds ("300"),
// 0 or more.
func durationValue(p func(*Config) *time.Duration) value {
	return value{
		set: func(c *Config, v string) error {
			v = strings.TrimSpace(v)
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
				*p(c) = time.Duration(n) * time.Second
				return nil
			}
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return fmt.Errorf("want a duration such as 5m or 300s (0 disables), got %q", v)
			}
			*p(c) = d
			return nil
		},
		get: func(c *Config) string { return p(c).String() },
		check: func(c *Config) []string {
			if *p(c) < 0 {
				return problem("must not be negative")
			}
			return nil
		},
	}
}

// mbValue is a size set in whole megabytes and held in bytes.
func mbValue(p func(*Config) *int64) value {
	return value{
		set: func(c *Config, v string) error {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n <= 0 {
				return fmt.Errorf("want a positive whole number of megabytes, got %q", v)
			}
			*p(c) = n << 20
			return nil
		},
		get: func(c *Config) string { return strconv.FormatInt(*p(c)>>20, 10) },
	}
}

// textValue is a string, cleaned by clean when it is not nil.
func textValue(p func(*Config) *string, clean func(string) string) value {
	return value{
		set: func(c *Config, v string) error {
			if clean != nil {
				v = clean(v)
			}
			*p(c) = v
			return nil
		},
		get: func(c *Config) string { return *p(c) },
	}
}

// listValue is a comma-separated list.
func listValue(p func(*Config) *[]string) value {
	return value{
		set: func(c *Config, v string) error {
			*p(c) = splitList(v)
			return nil
		},
		get: func(c *Config) string { return strings.Join(*p(c), ",") },
	}
}

// shown returns v shown through f, which hides what is secret.
func (v value) shown(f func(string) string) value {
	get := v.get
	v.get = func(c *Config) string { return f(get(c)) }
	return v
}

// oneOf checks that a string setting is one of allowed.
func oneOf(field func(*Config) string, allowed ...string) func(*Config) []string {
	return func(c *Config) []string {
		v := field(c)
		if slices.Contains(allowed, v) {
			return nil
		}
		return problem(fmt.Sprintf("want %s, got %q", orList(allowed), v))
	}
}

// orList writes "a, b or c".
func orList(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

// problem is msg as a list of problems: none when msg is "".
func problem(msg string) []string {
	if msg == "" {
		return nil
	}
	return []string{msg}
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func redactList(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return fmt.Sprintf("<%d redacted>", len(v))
}

func redact(s string) string {
	if s == "" {
		return ""
	}
	return "<redacted>"
}

var passwordInURL = regexp.MustCompile(`(?i)(password=)[^&\s]+`)

// redactURL hides the password of a database URL, in userinfo or query form.
func redactURL(s string) string {
	if s == "" {
		return ""
	}
	if u, err := url.Parse(s); err == nil && u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
			s = u.String()
		}
	}
	return passwordInURL.ReplaceAllString(s, "${1}xxxxx")
}

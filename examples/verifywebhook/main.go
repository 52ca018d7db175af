// Verifies a webhook delivery with Go's standard library alone. In a receiver:
//
//	Verify(secret, r.Header.Get("X-FV-Timestamp"), r.Header.Get("X-FV-Signature"), rawBody, time.Now())
//
// From a shell: WEBHOOK_SECRET=whsec_… go run main.go TIMESTAMP SIGNATURE < raw-body
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// Tolerance refuses a captured delivery replayed later.
const Tolerance = 300 * time.Second

// Verify reports whether signature is "sha256=" + hex HMAC-SHA256(secret, timestamp + "." + rawBody).
func Verify(secret, timestamp, signature string, rawBody []byte, now time.Time) bool {
	ts, err := strconv.ParseUint(timestamp, 10, 40)
	if err != nil {
		return false
	}
	if age := now.Sub(time.Unix(int64(ts), 0)); age > Tolerance || age < -Tolerance {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp + "."))
	mac.Write(rawBody) // sign-check the raw bytes, before any JSON parsing
	expected := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	return hmac.Equal([]byte(expected), []byte(signature)) // constant time
}

func main() {
	body, err := io.ReadAll(os.Stdin)
	if err != nil {
		panic(err)
	}
	if !Verify(os.Getenv("WEBHOOK_SECRET"), os.Args[1], os.Args[2], body, time.Now()) {
		fmt.Println("refused")
		os.Exit(1)
	}
	fmt.Println("verified")
}

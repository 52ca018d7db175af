// Verifies a webhook delivery with Go's standard library alone. In a receiver:
//
//	Verify([]string{secret}, r.Header.Get("X-FV-Timestamp"),
//		[]string{r.Header.Get("X-FV-Signature"), r.Header.Get("X-FV-Signature-Next")}, rawBody, time.Now())
//
// During a secret rotation's overlap pass both secrets: []string{newSecret, oldSecret}.
// From a shell: WEBHOOK_SECRET=whsec_…[,whsec_…] go run main.go TIMESTAMP SIGNATURE [SIGNATURE_NEXT] < raw-body
package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// Tolerance refuses a captured delivery replayed later.
const Tolerance = 300 * time.Second

// Verify reports whether a signature (an empty one is an absent header) is "sha256=" + hex
// HMAC-SHA256(secret, timestamp + "." + rawBody) for one of the secrets.
func Verify(secrets []string, timestamp string, signatures []string, rawBody []byte, now time.Time) bool {
	ts, err := strconv.ParseUint(timestamp, 10, 40)
	if err != nil {
		return false
	}
	if age := now.Sub(time.Unix(int64(ts), 0)); age > Tolerance || age < -Tolerance {
		return false
	}
	ok := false
	for _, secret := range secrets {
		if secret == "" {
			panic("an empty secret: is WEBHOOK_SECRET set?")
		}
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(timestamp + "."))
		mac.Write(rawBody) // sign-check the raw bytes, before any JSON parsing
		expected := []byte("sha256=" + hex.EncodeToString(mac.Sum(nil)))
		for _, signature := range signatures {
			if signature != "" && hmac.Equal(expected, []byte(signature)) { // constant time
				ok = true
			}
		}
	}
	return ok
}

func main() {
	body, err := io.ReadAll(os.Stdin)
	if err != nil {
		panic(err)
	}
	secrets := strings.Split(os.Getenv("WEBHOOK_SECRET"), ",")
	if !Verify(secrets, os.Args[1], os.Args[2:], body, time.Now()) {
		fmt.Println("refused")
		os.Exit(1)
	}
	fmt.Println("verified")
}

package local

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"time"
)

// invokeRIE posts an event to a worker's RIE and returns the function's
// response; a function error (its errorType and errorMessage) is an error.
func invokeRIE(ctx context.Context, hc *http.Client, url string, body []byte) ([]byte, error) {
	var resp *http.Response
	for wait := 0; ; wait++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		resp, err = hc.Do(req)
		if err == nil {
			break
		}
		// No environment listening (the worker is being restarted): Lambda
		// would not invoke a dead environment but start a new one, so wait
		// for it rather than fail the invocation. A connection that breaks
		// during the invocation is a crash, and fails it like in Lambda.
		if !errors.Is(err, syscall.ECONNREFUSED) || wait >= 300 || ctx.Err() != nil {
			return nil, err
		}
		time.Sleep(20 * time.Millisecond)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("RIE answered %d: %s", resp.StatusCode, out)
	}
	var fnErr struct {
		ErrorType    string `json:"errorType"`
		ErrorMessage string `json:"errorMessage"`
	}
	if json.Unmarshal(out, &fnErr) == nil && fnErr.ErrorType != "" {
		return nil, fmt.Errorf("function error %s: %s", fnErr.ErrorType, fnErr.ErrorMessage)
	}
	return out, nil
}

package emulators_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/lambdasaga/lambdasaga/internal/awslocal"
	"github.com/lambdasaga/lambdasaga/internal/emulators"
)

// TestDynalite runs its own emulators, so that a regression here takes down
// only this test's dynalite, not the one the other tests share.
func TestDynalite(t *testing.T) {
	dir := "../../tools/emulators"
	if _, err := os.Stat(dir + "/node_modules/dynalite"); err != nil {
		t.Skip("emulators not installed (make emulators)")
	}
	e, err := emulators.Start(context.Background(), emulators.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	addr := strings.TrimPrefix(e.DynamoDBEndpoint, "http://")

	// A worker SIGKILLed while it sends a request leaves dynalite a request
	// whose body never arrives and whose connection closes: with a reset if
	// the kernel still held unread data, else a FIN. dynalite's own command
	// line threw on that ("aborted", ECONNRESET) and died, and every later
	// call got "connection refused".
	t.Run("survives clients that go away mid-request", func(t *testing.T) {
		for _, reset := range []bool{true, false} {
			for range 5 {
				abortRequest(t, addr, reset)
				if err := healthy(e.DynamoDBEndpoint); err != nil {
					t.Fatalf("after a request aborted (reset %v): %v", reset, err)
				}
			}
		}
		// The crash came on the server's next turn of its event loop; give
		// it a few before the last look.
		time.Sleep(200 * time.Millisecond)
		if err := healthy(e.DynamoDBEndpoint); err != nil {
			t.Fatalf("after aborted requests: %v", err)
		}
	})

	// The flags emulators.Start passes reach dynalite: with --createTableMs 0
	// a new table is ACTIVE at once (dynalite's default keeps it CREATING
	// for 500ms).
	t.Run("tables are active at once", func(t *testing.T) {
		ctx := context.Background()
		db := awslocal.DynamoDB(e.DynamoDBEndpoint)
		name := aws.String("emulators-flags")
		_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{
			TableName:            name,
			BillingMode:          types.BillingModePayPerRequest,
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("pk"), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("pk"), KeyType: types.KeyTypeHash}},
		})
		if err != nil {
			t.Fatal(err)
		}
		// dynalite flips the status on a timer of createTableMs (0 here),
		// which a busy machine may run a moment after the answer: allow
		// 100 ms, far under the 500 ms of its default.
		var got types.TableStatus
		for deadline := time.Now().Add(100 * time.Millisecond); ; time.Sleep(5 * time.Millisecond) {
			out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: name})
			if err != nil {
				t.Fatal(err)
			}
			if got = out.Table.TableStatus; got == types.TableStatusActive || time.Now().After(deadline) {
				break
			}
		}
		if got != types.TableStatusActive {
			t.Errorf("table status 100 ms after CreateTable = %s, want ACTIVE", got)
		}
	})
}

// abortRequest sends the headers of a PutItem and part of its body, then
// closes the connection, with a reset (SO_LINGER 0) or a FIN.
func abortRequest(t *testing.T, addr string, reset bool) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatalf("dial dynalite: %v", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	// Expect: 100-continue makes Node answer "100 Continue" just before it
	// hands the request to dynalite's handler, so once it is read the
	// handler has its listeners on the request.
	fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Type: application/x-amz-json-1.0\r\n"+
		"X-Amz-Target: DynamoDB_20120810.PutItem\r\nContent-Length: 100000\r\nExpect: 100-continue\r\n\r\n", addr)
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		t.Fatalf("read the interim response: %v", err)
	}
	if !strings.HasPrefix(status, "HTTP/1.1 100") {
		t.Fatalf("interim response %q, want 100 Continue", status)
	}
	if _, err := io.WriteString(conn, `{"TableName":"t","Item":{"pk":{"S":"`); err != nil {
		t.Fatalf("write part of the body: %v", err)
	}
	if reset {
		if err := conn.(*net.TCPConn).SetLinger(0); err != nil {
			t.Fatal(err)
		}
	}
}

// healthy asks dynalite's health check on a new connection.
func healthy(endpoint string) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(endpoint)
	if err != nil {
		return fmt.Errorf("dynalite does not answer: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("dynalite's health check: %s", resp.Status)
	}
	return nil
}

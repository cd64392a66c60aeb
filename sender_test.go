package mailroom

import (
	"context"
	"testing"
)

func TestSenderNeedsACallerAndAnOriginSession(t *testing.T) {
	d := Draft{OriginSessionID: "SESSION:x"}
	if _, err := Sender(context.Background(), d); ErrorCode(err) != EUNAUTHORIZED {
		t.Fatalf("no caller: %v", err)
	}
	alice := Identity{ID: 1, Name: "alice", Kind: KindAgent}
	ctx := WithCaller(context.Background(), alice)
	if me, err := Sender(ctx, d); err != nil || me != alice {
		t.Fatalf("Sender = %+v, %v", me, err)
	}
	if _, err := Sender(ctx, Draft{}); err == nil || err.Error() != "originSessionId is required" || ErrorCode(err) != EINVALID {
		t.Fatalf("no origin session: %v", err)
	}
}

package mailroom

import (
	"context"
	"time"
)

// RunFolder is a store's background folder loop, the same for every store:
// woken by wake or every poll, it calls step until step reports nothing
// more to do; after an error it reports it to failed, waits retry and
// calls step again. It returns when ctx is done.
func RunFolder(ctx context.Context, wake <-chan struct{}, poll, retry time.Duration, step func(context.Context) (more bool, err error), failed func(error)) {
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-wake:
		case <-ticker.C:
		}
		for {
			more, err := step(ctx)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				failed(err)
				select {
				case <-ctx.Done():
					return
				case <-time.After(retry):
				}
				continue
			}
			if !more {
				break
			}
		}
	}
}

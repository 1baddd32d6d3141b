package sounding

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"

	soundingv1 "sounding.dev/client/gen/sounding/v1"
)

// ObserverOptions tune a ToolUseObserver; zero values take the defaults shown.
type ObserverOptions struct {
	QueueSize     int           // events waiting to be sent (1000); a full queue drops
	BatchSize     int           // events per Observe call (64)
	FlushInterval time.Duration // how long the first event of a batch waits for others (500 ms)
	CallTimeout   time.Duration // one Observe call (10 s)
	MaxAttempts   int           // calls per batch before it is given up (4)
	Backoff       time.Duration // before the second attempt, doubling after (200 ms)
}

// ToolUseObserver reports the tools an agent used without ever blocking it (the tool-selection
// spec's non-blocking hand-off): Observe only queues the event on a bounded channel and returns,
// a full queue drops it (counted); a goroutine sends batches to Observe, retrying failed calls.
// Close stops intake, sends what is queued within its timeout, cancels the rest and returns
// once the goroutine is gone. Close is safe to call twice; a closed observer, or one made
// without a client, ignores Observe.
type ToolUseObserver struct {
	client  *Client
	options ObserverOptions
	queue   chan *soundingv1.ToolUseEvent
	closing chan struct{}
	cancel  context.CancelFunc
	ctx     context.Context
	done    sync.WaitGroup
	closed  atomic.Bool
	once    sync.Once
	// Sent counts events the server recorded; Dropped, those a full queue refused or Close
	// cancelled; Failed, those of batches given up or refused.
	Sent, Dropped, Failed atomic.Int64
}

// NewToolUseObserver starts an observer on client (nil: an observer that ignores everything).
func NewToolUseObserver(client *Client, options ObserverOptions) *ToolUseObserver {
	defaults := ObserverOptions{1000, 64, 500 * time.Millisecond, 10 * time.Second, 4, 200 * time.Millisecond}
	if options.QueueSize <= 0 {
		options.QueueSize = defaults.QueueSize
	}
	if options.BatchSize <= 0 {
		options.BatchSize = defaults.BatchSize
	}
	if options.FlushInterval <= 0 {
		options.FlushInterval = defaults.FlushInterval
	}
	if options.CallTimeout <= 0 {
		options.CallTimeout = defaults.CallTimeout
	}
	if options.MaxAttempts <= 0 {
		options.MaxAttempts = defaults.MaxAttempts
	}
	if options.Backoff <= 0 {
		options.Backoff = defaults.Backoff
	}
	o := &ToolUseObserver{client: client, options: options, closing: make(chan struct{})}
	if client == nil {
		o.closed.Store(true)
		return o
	}
	o.queue = make(chan *soundingv1.ToolUseEvent, options.QueueSize)
	o.ctx, o.cancel = context.WithCancel(context.Background())
	o.done.Add(1)
	go o.work()
	return o
}

// Observe queues a tool use and returns at once. success is nil when the agent does not know.
func (o *ToolUseObserver) Observe(toolset, request, usedTool string, offeredTools []string, success *bool) {
	if o.closed.Load() {
		return
	}
	select {
	case o.queue <- &soundingv1.ToolUseEvent{Toolset: toolset, Request: request, UsedTool: usedTool, OfferedTools: offeredTools, Success: success}:
	default:
		o.Dropped.Add(1)
	}
}

// Close stops intake and gives the queued events timeout to be sent; what is left is cancelled.
func (o *ToolUseObserver) Close(timeout time.Duration) {
	o.once.Do(func() {
		o.closed.Store(true)
		if o.client == nil {
			return
		}
		close(o.closing)
		finished := make(chan struct{})
		go func() { o.done.Wait(); close(finished) }()
		select {
		case <-finished:
		case <-time.After(timeout):
			o.cancel()
			<-finished
		}
		o.cancel()
	})
}

func (o *ToolUseObserver) work() {
	defer o.done.Done()
	for {
		batch, more := o.take()
		if len(batch) > 0 {
			o.send(batch)
		}
		if !more {
			return
		}
	}
}

// take returns the next batch, and false once the observer is closing and the queue is empty
// (or the close timeout cancelled the rest, which is then counted as dropped).
func (o *ToolUseObserver) take() ([]*soundingv1.ToolUseEvent, bool) {
	var batch []*soundingv1.ToolUseEvent
	timer := time.NewTimer(o.options.FlushInterval)
	defer timer.Stop()
	select {
	case event := <-o.queue:
		batch = append(batch, event)
	case <-timer.C:
		return nil, true
	case <-o.closing:
	case <-o.ctx.Done():
	}
	for len(batch) < o.options.BatchSize {
		select {
		case event := <-o.queue:
			batch = append(batch, event)
			continue
		default:
		}
		break
	}
	if o.ctx.Err() != nil {
		o.Dropped.Add(int64(len(batch) + len(o.queue)))
		for len(o.queue) > 0 {
			<-o.queue
		}
		return nil, false
	}
	closing := false
	select {
	case <-o.closing:
		closing = true
	default:
	}
	return batch, !(closing && len(batch) == 0 && len(o.queue) == 0)
}

func (o *ToolUseObserver) send(batch []*soundingv1.ToolUseEvent) {
	requests := make([]*soundingv1.ObserveRequest, len(batch))
	for i, event := range batch {
		requests[i] = &soundingv1.ObserveRequest{Observation: &soundingv1.ObserveRequest_ToolUse{ToolUse: event}}
	}
	backoff := o.options.Backoff
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(o.ctx, o.options.CallTimeout)
		response, err := o.client.Observe(ctx, requests...)
		cancel()
		if err == nil {
			o.Sent.Add(response.Recorded)
			o.Failed.Add(int64(len(response.Rejected)))
			return
		}
		if o.ctx.Err() != nil {
			o.Dropped.Add(int64(len(batch)))
			return
		}
		if !retried(err) || attempt == o.options.MaxAttempts {
			o.Failed.Add(int64(len(batch)))
			return
		}
		select {
		case <-time.After(backoff):
		case <-o.ctx.Done():
			o.Dropped.Add(int64(len(batch)))
			return
		}
		backoff *= 2
	}
}

func retried(err error) bool {
	var failure *Error
	if !errors.As(err, &failure) {
		return false
	}
	switch failure.Code {
	case codes.Unavailable, codes.DeadlineExceeded, codes.ResourceExhausted, codes.Aborted, codes.Internal, codes.Unknown:
		return true
	}
	return false
}

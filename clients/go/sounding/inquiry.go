package sounding

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	soundingv1 "sounding.dev/client/gen/sounding/v1"
)

// DefaultResumeWithin is how long an Inquiry keeps resuming a stream that broke, unless its
// ResumeWithin says otherwise.
const DefaultResumeWithin = 30 * time.Second

const resumePause = 250 * time.Millisecond

// Inquiry is a live Inquire session: Recv its Belief, Ask and InquiryAnswer events; after an
// Ask, Answer it before the next Recv. SessionID is known after the first event and lets
// ResumeInquiry continue the session on a new stream.
//
// Once the session is known, a stream the server ends with Unavailable or that is cut (its
// orchestrator draining, restarting or gone) is resumed on a new stream, which the deployment's
// balancer may send to another orchestrator, for up to ResumeWithin (a session a dead
// orchestrator held is free once its hold expires): the events already delivered are not
// delivered again, and an answer the server had not applied is sent again. A session another
// stream took over is not resumed.
type Inquiry struct {
	// ResumeWithin bounds the resumes of one break (DefaultResumeWithin; zero: never resume).
	ResumeWithin time.Duration
	// Resumes counts the streams this session was resumed on.
	Resumes int

	client  *Client
	ctx     context.Context
	stream  soundingv1.SoundingService_InquireClient
	cancel  context.CancelFunc
	session string
	lastAsk *soundingv1.Ask
	answer  *soundingv1.InquireRequest // to lastAsk, once sent

	brokenSince time.Time                   // when the streams began to break, while they do
	replaying   bool                        // a resumed stream re-sends the Belief and the pending Ask
	belief      *soundingv1.InquireResponse // a re-sent Belief, delivered if what follows is new
	next        *soundingv1.InquireResponse // the event to deliver after that Belief
}

// Inquire starts a session.
func (c *Client) Inquire(ctx context.Context, start *soundingv1.InquiryStart) (*Inquiry, error) {
	return c.inquire(ctx, &soundingv1.InquireRequest{Message: &soundingv1.InquireRequest_Start{Start: start}})
}

// ResumeInquiry continues a stored session: it first re-sends the current Belief and the
// pending Ask (or the final answer).
func (c *Client) ResumeInquiry(ctx context.Context, sessionID string) (*Inquiry, error) {
	return c.inquire(ctx, resumeRequest(sessionID))
}

func resumeRequest(sessionID string) *soundingv1.InquireRequest {
	resume := &soundingv1.InquiryResume{SessionId: sessionID}
	return &soundingv1.InquireRequest{Message: &soundingv1.InquireRequest_Resume{Resume: resume}}
}

func (c *Client) inquire(ctx context.Context, first *soundingv1.InquireRequest) (*Inquiry, error) {
	inquiry := &Inquiry{ResumeWithin: DefaultResumeWithin, client: c, ctx: ctx}
	if err := inquiry.open(first); err != nil {
		return nil, asError(err)
	}
	return inquiry, nil
}

func (i *Inquiry) open(first *soundingv1.InquireRequest) error {
	ctx, cancel := context.WithCancel(i.ctx)
	stream, err := i.client.sounding.Inquire(ctx)
	if err == nil {
		err = stream.Send(first)
	}
	if err != nil {
		cancel()
		return err
	}
	i.stream, i.cancel = stream, cancel
	return nil
}

// cut says whether the call's server went away under it: Unavailable, or a stream reset (a
// balancer cuts a stream whose server died with RST_STREAM, which gRPC reports as Internal).
func cut(err *Error) bool {
	return err.Code == codes.Unavailable || (err.Code == codes.Internal && strings.Contains(err.Message, "RST_STREAM"))
}

func (i *Inquiry) resumable(err error) bool {
	failure, ok := err.(*Error)
	if !ok || i.session == "" || i.ResumeWithin <= 0 || i.ctx.Err() != nil {
		return false
	}
	if !i.brokenSince.IsZero() && time.Since(i.brokenSince) > i.ResumeWithin {
		return false
	}
	if cut(failure) {
		return failure.Reason != "SESSION_TAKEN_OVER"
	}
	// A resume that finds the session still held by the stream that broke.
	return !i.brokenSince.IsZero() && failure.Reason == "SESSION_BUSY"
}

// resume opens a new stream on the session after `err` broke the last one; err if it may not.
func (i *Inquiry) resume(err error) error {
	for {
		if !i.resumable(err) {
			return err
		}
		if i.brokenSince.IsZero() {
			i.brokenSince = time.Now()
		}
		i.cancel()
		select {
		case <-time.After(resumePause):
		case <-i.ctx.Done():
			return err
		}
		i.Resumes++
		i.replaying, i.belief = true, nil
		if err = asError(i.open(resumeRequest(i.session))); err == nil {
			return nil
		}
	}
}

// Recv returns the next event, io.EOF after the answer, or an *Error.
func (i *Inquiry) Recv() (*soundingv1.InquireResponse, error) {
	if i.next != nil {
		event := i.next
		i.next = nil
		return event, nil
	}
	for {
		event, err := i.stream.Recv()
		if err == io.EOF {
			return nil, err
		}
		if err != nil {
			if err := i.resume(asError(err)); err != nil {
				return nil, err
			}
			continue
		}
		switch e := event.Event.(type) {
		case *soundingv1.InquireResponse_Belief:
			i.session = e.Belief.SessionId
			if i.replaying {
				i.belief = event
				continue
			}
		case *soundingv1.InquireResponse_Ask:
			i.session = e.Ask.SessionId
			if i.replaying && i.lastAsk != nil && e.Ask.QuestionId == i.lastAsk.QuestionId {
				i.replaying, i.belief = false, nil // delivered before the break
				if i.answer != nil {
					if err := i.stream.Send(i.answer); err != nil && err != io.EOF {
						return nil, asError(err)
					}
				}
				continue
			}
			i.lastAsk, i.answer = e.Ask, nil
		case *soundingv1.InquireResponse_Answer:
			i.session = e.Answer.SessionId
		}
		i.replaying, i.brokenSince = false, time.Time{}
		if i.belief != nil {
			belief := i.belief
			i.belief, i.next = nil, event
			return belief, nil
		}
		return event, nil
	}
}

// SessionID is the session's id once the first event arrived.
func (i *Inquiry) SessionID() string { return i.session }

// Answer answers the last question asked. An answer sent on a stream that broke is sent again
// on the stream the session resumes on.
func (i *Inquiry) Answer(answer string) error {
	if i.lastAsk == nil {
		return fmt.Errorf("no question has been asked yet")
	}
	observation := &soundingv1.InquiryObservation{QuestionId: i.lastAsk.QuestionId, Answer: answer}
	i.answer = &soundingv1.InquireRequest{Message: &soundingv1.InquireRequest_Observation{Observation: observation}}
	if err := i.stream.Send(i.answer); err != nil && err != io.EOF {
		return asError(err)
	}
	return nil // a broken stream shows at the next Recv, which resumes it
}

// Close ends the stream; the session stays stored and can be resumed.
func (i *Inquiry) Close() {
	_ = i.stream.CloseSend()
	i.cancel()
}

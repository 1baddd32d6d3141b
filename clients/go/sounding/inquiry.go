package sounding

import (
	"context"
	"fmt"
	"io"

	soundingv1 "sounding.dev/client/gen/sounding/v1"
)

// Inquiry is a live Inquire session: Recv its Belief, Ask and InquiryAnswer events; after an
// Ask, Answer it before the next Recv. SessionID is known after the first event and lets
// ResumeInquiry continue the session on a new stream.
type Inquiry struct {
	stream  soundingv1.SoundingService_InquireClient
	cancel  context.CancelFunc
	session string
	lastAsk *soundingv1.Ask
}

// Inquire starts a session.
func (c *Client) Inquire(ctx context.Context, start *soundingv1.InquiryStart) (*Inquiry, error) {
	return c.inquire(ctx, &soundingv1.InquireRequest{Message: &soundingv1.InquireRequest_Start{Start: start}})
}

// ResumeInquiry continues a stored session: it first re-sends the current Belief and the
// pending Ask (or the final answer).
func (c *Client) ResumeInquiry(ctx context.Context, sessionID string) (*Inquiry, error) {
	resume := &soundingv1.InquiryResume{SessionId: sessionID}
	return c.inquire(ctx, &soundingv1.InquireRequest{Message: &soundingv1.InquireRequest_Resume{Resume: resume}})
}

func (c *Client) inquire(ctx context.Context, first *soundingv1.InquireRequest) (*Inquiry, error) {
	ctx, cancel := context.WithCancel(ctx)
	stream, err := c.sounding.Inquire(ctx)
	if err != nil {
		cancel()
		return nil, asError(err)
	}
	if err := stream.Send(first); err != nil {
		cancel()
		return nil, asError(err)
	}
	return &Inquiry{stream: stream, cancel: cancel}, nil
}

// Recv returns the next event, io.EOF after the answer, or an *Error.
func (i *Inquiry) Recv() (*soundingv1.InquireResponse, error) {
	event, err := i.stream.Recv()
	if err == io.EOF {
		return nil, err
	}
	if err != nil {
		return nil, asError(err)
	}
	switch e := event.Event.(type) {
	case *soundingv1.InquireResponse_Belief:
		i.session = e.Belief.SessionId
	case *soundingv1.InquireResponse_Ask:
		i.session, i.lastAsk = e.Ask.SessionId, e.Ask
	case *soundingv1.InquireResponse_Answer:
		i.session = e.Answer.SessionId
	}
	return event, nil
}

// SessionID is the session's id once the first event arrived.
func (i *Inquiry) SessionID() string { return i.session }

// Answer answers the last question asked.
func (i *Inquiry) Answer(answer string) error {
	if i.lastAsk == nil {
		return fmt.Errorf("no question has been asked yet")
	}
	observation := &soundingv1.InquiryObservation{QuestionId: i.lastAsk.QuestionId, Answer: answer}
	return asError(i.stream.Send(&soundingv1.InquireRequest{Message: &soundingv1.InquireRequest_Observation{Observation: observation}}))
}

// Close ends the stream; the session stays stored and can be resumed.
func (i *Inquiry) Close() {
	_ = i.stream.CloseSend()
	i.cancel()
}

package sounding

import (
	"context"

	soundingv1 "sounding.dev/client/gen/sounding/v1"
)

// PutTools adds tools to a toolset or replaces them by name (creating the toolset): one new
// version of it. It returns the version and the toolset's tool count.
func (c *Client) PutTools(ctx context.Context, toolset string, tools ...*soundingv1.Tool) (*soundingv1.PutToolsResponse, error) {
	response, err := c.tools.PutTools(ctx, &soundingv1.PutToolsRequest{Toolset: toolset, Tools: tools})
	return response, asError(err)
}

// DeleteTools removes tools from a toolset; with forgetExemplars, also what they learned from use.
func (c *Client) DeleteTools(ctx context.Context, toolset string, names []string, forgetExemplars bool) (*soundingv1.DeleteToolsResponse, error) {
	response, err := c.tools.DeleteTools(ctx, &soundingv1.DeleteToolsRequest{Toolset: toolset, Names: names, ForgetExemplars: forgetExemplars})
	return response, asError(err)
}

// ListTools returns every tool of a toolset, by name, page by page.
func (c *Client) ListTools(ctx context.Context, toolset string) ([]*soundingv1.Tool, error) {
	var tools []*soundingv1.Tool
	token := ""
	for {
		page, err := c.tools.ListTools(ctx, &soundingv1.ListToolsRequest{Toolset: toolset, PageToken: token})
		if err != nil {
			return nil, asError(err)
		}
		tools = append(tools, page.Tools...)
		if token = page.NextPageToken; token == "" {
			return tools, nil
		}
	}
}

// RouteTool ranks a toolset's tools for a request (among offeredTools, if any are given).
func (c *Client) RouteTool(ctx context.Context, toolset, request string, topK int32, offeredTools ...string) (*soundingv1.RouteToolResponse, error) {
	response, err := c.tools.RouteTool(ctx, &soundingv1.RouteToolRequest{Toolset: toolset, Request: request, TopK: topK, OfferedTools: offeredTools})
	return response, asError(err)
}

// ToolMetrics reports what the learning loop has done for a toolset.
func (c *Client) ToolMetrics(ctx context.Context, toolset string) (*soundingv1.GetToolMetricsResponse, error) {
	response, err := c.tools.GetToolMetrics(ctx, &soundingv1.GetToolMetricsRequest{Toolset: toolset})
	return response, asError(err)
}

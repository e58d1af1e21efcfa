-- server: "zen-compatible" gateways / llmsproxy speaking OpenAI Chat Completions.
-- Keeps disable_thinking and per-message reasoning_content (the gateway routes on them),
-- drops only extra_body. Full usage normalisation; flattened streaming tool calls carry
-- raw_arguments + stream_index.
return {
  name = "server",
  version = "2.0.0",
  endpoint = "/chat/completions",
  headers = {},

  transform_request = function(raw)
    local req = compat.request(raw, { keep_thinking = true, keep_reasoning = true })
    return json.encode(req)
  end,

  transform_response = function(raw)
    return json.encode(compat.response(raw))
  end,

  transform_stream_chunk = function(line)
    local chunk = compat.chunk(line)
    if chunk == nil then return "" end
    return json.encode(chunk)
  end,

  transform_error = function(status, body)
    return compat.error_reason(status, body)
  end,
}

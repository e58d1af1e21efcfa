-- mistral (OpenAI-compatible): https://docs.mistral.ai/api/#tag/chat
-- Defaults: model mistral-large-latest, temperature 0.7, max_tokens 4096; strips disable_thinking,
-- extra_body and per-message reasoning_content.
return {
  name = "mistral",
  version = "2.0.0",
  endpoint = "/v1/chat/completions",
  headers = {},

  transform_request = function(raw)
    local req = compat.request(raw, { model = "mistral-large-latest" })
    req.stream_options = nil  -- not accepted by this vendor; usage arrives in the last frame
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

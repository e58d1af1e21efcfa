-- qwen: Alibaba Cloud DashScope, OpenAI-compatible mode.
-- https://help.aliyun.com/zh/model-studio/compatibility-of-openai-with-dashscope
-- base_url e.g. https://dashscope.aliyuncs.com/compatible-mode/v1
-- disable_thinking -> enable_thinking = false (Qwen3 hybrid-thinking switch).
return {
  name = "qwen",
  version = "1.0.0",
  endpoint = "/chat/completions",
  headers = {},

  transform_request = function(raw)
    local req = compat.request(raw, { model = "qwen-plus", keep_thinking = true })
    if req.disable_thinking then req.enable_thinking = false end
    req.disable_thinking = nil
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

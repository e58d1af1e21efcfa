-- zhipu: Zhipu AI GLM, OpenAI-shaped chat completions.
-- https://docs.bigmodel.cn/api-reference (POST /api/paas/v4/chat/completions)
-- base_url e.g. https://open.bigmodel.cn/api/paas/v4
-- disable_thinking -> thinking = {type = "disabled"} (GLM-4.5+); temperature kept in (0, 1].
return {
  name = "zhipu",
  version = "1.0.0",
  endpoint = "/chat/completions",
  headers = {},

  transform_request = function(raw)
    local req = compat.request(raw, { model = "glm-4.5", keep_thinking = true })
    if req.disable_thinking then req.thinking = { type = "disabled" } end
    req.disable_thinking = nil
    req.stream_options = nil
    if type(req.temperature) == "number" then
      if req.temperature > 1 then req.temperature = 1 end
      if req.temperature <= 0 then req.temperature = 0.01 end
    end
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

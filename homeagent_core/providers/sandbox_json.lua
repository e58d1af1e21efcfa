-- JSON for the Lua sandbox: json.encode / json.decode / json.null / json.array.
-- Pure Lua, tuned for Lua 5.4: strings are scanned with plain string.find (pattern classes
-- cost ~15 ns/byte), and decoded strings remember their JSON literal so re-encoding a
-- decoded request copies instead of re-escaping. Decoded arrays carry a marker metatable so
-- empty arrays re-encode as [] (a plain empty table encodes as {}). JSON null decodes to nil
-- in objects and to json.null in arrays. The encoder never triggers metamethods, so it can run
-- outside the instruction hook (see lua.py). Lenient: raw control characters inside input
-- strings are accepted.
local byte, sub, find, format, gsub, char = string.byte, string.sub, string.find, string.format, string.gsub, string.char
local concat, tointeger, mtype = table.concat, math.tointeger, math.type
local floor, huge = math.floor, math.huge
local utf8char = utf8.char
-- Both metatables are protected (__metatable): a script that could reach them could add a
-- __gc to array_mt (every decoded array would get a finalizer) or change null's __tostring.
local array_mt = {__name = "json.array", __metatable = "json.array"}
local null = setmetatable({}, {__name = "json.null", __metatable = "json.null",
  __tostring = function() return "null" end})

local safe, nsafe = {}, 0   -- decoded string -> true (no escaping needed) or its JSON literal
local bs_pos = 0            -- cached position of the next backslash in the current input
local function remember(str, lit)
  if nsafe > 8192 then safe, nsafe = {}, 0 end
  nsafe = nsafe + 1
  safe[str] = lit
end

local escapes = { ['"'] = '\\"', ['\\'] = '\\\\', ['\b'] = '\\b', ['\f'] = '\\f',
  ['\n'] = '\\n', ['\r'] = '\\r', ['\t'] = '\\t' }
local function esc_char(c)
  return escapes[c] or format("\\u%04x", byte(c))
end

local encode_value
local function encode_string(s, buf, n)
  local lit = safe[s]
  if lit == true or (lit == nil and not find(s, '[%c"\\]')) then
    buf[n + 1] = '"'; buf[n + 2] = s; buf[n + 3] = '"'
    return n + 3
  end
  n = n + 1
  buf[n] = lit or ('"' .. gsub(s, '[%c"\\]', esc_char) .. '"')
  return n
end

encode_value = function(v, buf, n, depth)
  local t = type(v)
  if t == "string" then
    return encode_string(v, buf, n)
  elseif t == "number" then
    n = n + 1
    if mtype(v) == "integer" then buf[n] = format("%d", v)
    elseif v ~= v or v == huge or v == -huge then error("cannot encode non-finite number")
    elseif v == floor(v) and v > -1e15 and v < 1e15 then buf[n] = format("%d", v)
    else buf[n] = format("%.17g", v) end
    return n
  elseif t == "boolean" then
    n = n + 1; buf[n] = v and "true" or "false"; return n
  elseif t == "nil" or rawequal(v, null) then
    n = n + 1; buf[n] = "null"; return n
  elseif t == "table" then
    if depth > 200 then error("nesting too deep") end
    -- raw accesses only: no metamethod (script code) may run while encoding
    local mt = getmetatable(v)
    if mt == "json.array" or rawget(v, 1) ~= nil then
      local len = rawlen(v)
      n = n + 1; buf[n] = "["
      for i = 1, len do
        if i > 1 then n = n + 1; buf[n] = "," end
        n = encode_value(rawget(v, i), buf, n, depth + 1)
      end
      n = n + 1; buf[n] = "]"
      return n
    end
    n = n + 1; buf[n] = "{"
    local first = true
    for k, val in next, v do
      local kt = type(k)
      if kt == "string" or kt == "number" then
        if not first then n = n + 1; buf[n] = "," end
        first = false
        n = encode_string(kt == "string" and k or tostring(k), buf, n)
        n = n + 1; buf[n] = ":"
        n = encode_value(val, buf, n, depth + 1)
      end
    end
    n = n + 1; buf[n] = "}"
    return n
  end
  error("cannot encode value of type " .. t)
end

local function encode(v)
  local buf = {}
  local ok, n = pcall(encode_value, v, buf, 0, 0)
  if not ok then
    if n == "not enough memory" then error(n, 0) end
    return "null"
  end
  return concat(buf, "", 1, n)
end

-- decoding
local decode_value
local esc_map = { b = "\b", f = "\f", n = "\n", r = "\r", t = "\t", ['"'] = '"', ['\\'] = '\\', ['/'] = '/' }

local function decode_error(s, i, msg)
  error(format("json: %s at position %d", msg, i), 0)
end

local function skip_ws(s, i)
  local c = byte(s, i)
  if c == nil or c > 32 then return i end
  return find(s, "[^ \t\r\n]", i) or #s + 1
end


local function decode_string(s, i)
  local j = i + 1
  local q = find(s, '"', j, true)
  if not q then decode_error(s, i, "unterminated string") end
  if bs_pos ~= false and bs_pos < j then bs_pos = find(s, "\\", j, true) or false end
  if bs_pos == false or bs_pos > q then
    local str = sub(s, j, q - 1)
    remember(str, true)
    return str, q + 1
  end
  local parts, np = {}, 0
  local k = bs_pos
  while true do
    -- k: next backslash (or false); q: next quote. Plain finds only: pattern classes are slow.
    if k == false or k > q then
      np = np + 1; parts[np] = sub(s, j, q - 1)
      local str = concat(parts, "", 1, np)
      remember(str, sub(s, i, q))
      bs_pos = k
      return str, q + 1
    end
    np = np + 1; parts[np] = sub(s, j, k - 1)
    local e = sub(s, k + 1, k + 1)
    if e == "u" then
      local hex = sub(s, k + 2, k + 5)
      if not find(hex, "^%x%x%x%x$") then decode_error(s, k, "bad unicode escape") end
      local cp = tonumber(hex, 16)
      local nexti = k + 6
      if cp >= 0xD800 and cp <= 0xDBFF and sub(s, nexti, nexti + 1) == "\\u" then
        local lo = tonumber(sub(s, nexti + 2, nexti + 5), 16)
        if lo and lo >= 0xDC00 and lo <= 0xDFFF then
          cp = 0x10000 + (cp - 0xD800) * 0x400 + (lo - 0xDC00)
          nexti = nexti + 6
        end
      end
      np = np + 1; parts[np] = utf8char(cp)
      j = nexti
    else
      local r = esc_map[e]
      if not r then decode_error(s, k, "bad escape") end
      np = np + 1; parts[np] = r
      j = k + 2
    end
    if j > q then
      q = find(s, '"', j, true)
      if not q then decode_error(s, i, "unterminated string") end
    end
    k = find(s, "\\", j, true) or false
  end
end

local function decode_number(s, i)
  local _, e = find(s, "^-?%d+%.?%d*[eE]?[-+]?%d*", i)
  if not e then decode_error(s, i, "bad number") end
  local str = sub(s, i, e)
  local v = tointeger(tonumber(str)) or tonumber(str)
  if v == nil then decode_error(s, i, "bad number") end
  if not find(str, "[.eE]") then v = math.tointeger(v) or v end
  return v, e + 1
end

-- ws(s, i) -> (byte at the next non-blank position, that position). Compact JSON (what orjson
-- and most vendors send) has no blanks, so the common case is a single string.byte call.
local function ws(s, i)
  local c = byte(s, i)
  if c ~= nil and c <= 32 then
    i = skip_ws(s, i)
    c = byte(s, i)
  end
  return c, i
end

decode_value = function(s, i, depth)
  local c
  c, i = ws(s, i)
  if c == 34 then
    return decode_string(s, i)
  elseif c == 123 then -- {
    if depth > 200 then decode_error(s, i, "nesting too deep") end
    local obj = {}
    c, i = ws(s, i + 1)
    if c == 125 then return obj, i + 1 end
    while true do
      if c ~= 34 then decode_error(s, i, "expected string key") end
      local k; k, i = decode_string(s, i)
      c, i = ws(s, i)
      if c ~= 58 then decode_error(s, i, "expected ':'") end
      local v; v, i = decode_value(s, i + 1, depth + 1)
      if v ~= null then obj[k] = v end
      c, i = ws(s, i)
      if c == 125 then return obj, i + 1 end
      if c ~= 44 then decode_error(s, i, "expected ',' or '}'") end
      c, i = ws(s, i + 1)
    end
  elseif c == 91 then -- [
    if depth > 200 then decode_error(s, i, "nesting too deep") end
    local arr, n = setmetatable({}, array_mt), 0
    c, i = ws(s, i + 1)
    if c == 93 then return arr, i + 1 end
    while true do
      local v; v, i = decode_value(s, i, depth + 1)
      n = n + 1; arr[n] = v
      c, i = ws(s, i)
      if c == 93 then return arr, i + 1 end
      if c ~= 44 then decode_error(s, i, "expected ',' or ']'") end
      i = i + 1
    end
  elseif c == 116 then
    if sub(s, i, i + 3) == "true" then return true, i + 4 end
  elseif c == 102 then
    if sub(s, i, i + 4) == "false" then return false, i + 5 end
  elseif c == 110 then
    if sub(s, i, i + 3) == "null" then return null, i + 4 end
  elseif c == 45 or (c and c >= 48 and c <= 57) then
    return decode_number(s, i)
  end
  decode_error(s, i, "unexpected character")
end

local function decode(s)
  if type(s) ~= "string" then return nil, "json.decode expects a string" end
  bs_pos = 0
  local ok, v, i = pcall(decode_value, s, 1, 0)
  if not ok then return nil, v end
  i = skip_ws(s, i)
  if i <= #s then return nil, "json: trailing garbage at position " .. i end
  if v == null then return nil end
  return v
end
return { encode = encode, decode = decode, null = null, array_mt = array_mt }

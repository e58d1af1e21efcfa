-- Pattern functions for the Lua sandbox: string.find / match / gmatch / gsub that a count hook
-- can stop. Lua's own matcher backtracks inside one C call, where no hook runs: a pattern such
-- as ("a-"):rep(3) .. "b" against 3000 "a" runs for minutes. Every call first bounds the
-- matcher's worst-case work from the pattern's shape and the subject's length; when that bound
-- is small the C functions run (fast, and provably short), otherwise the same semantics run in
-- the pure-Lua matcher below, instruction by instruction under the caller's budget.
-- A port of lstrlib.c (Lua 5.4); results and error texts match the C functions.
local C_find, C_match, C_gmatch, C_gsub, fast_cost = ...
local byte, sub, char, format = string.byte, string.sub, string.char, string.format
local concat = table.concat
local type, tostring, tonumber, error, select = type, tostring, tonumber, error, select
local tointeger, mtype = math.tointeger, math.type

local L_ESC = 37 -- '%'
local MAXCCALLS = 200
local MAXCAPTURES = 32
local CAP_UNFINISHED, CAP_POSITION = -1, -2
local SPECIAL = {}
for c in ("^$*+?.([%-"):gmatch(".") do SPECIAL[byte(c)] = true end

-- character classes (C locale), one 256-entry table per class letter
local function isalpha(c) return (c >= 65 and c <= 90) or (c >= 97 and c <= 122) end
local function isdigit(c) return c >= 48 and c <= 57 end
local function isgraph(c) return c > 32 and c < 127 end
local TESTS = {
  a = isalpha,
  c = function(c) return c < 32 or c == 127 end,
  d = isdigit,
  g = isgraph,
  l = function(c) return c >= 97 and c <= 122 end,
  p = function(c) return isgraph(c) and not isalpha(c) and not isdigit(c) end,
  s = function(c) return c == 32 or (c >= 9 and c <= 13) end,
  u = function(c) return c >= 65 and c <= 90 end,
  w = function(c) return isalpha(c) or isdigit(c) end,
  x = function(c) return isdigit(c) or (c >= 97 and c <= 102) or (c >= 65 and c <= 70) end,
}
local CLASS = {}
for letter, test in pairs(TESTS) do
  local yes, no = {}, {}
  for c = 0, 255 do yes[c] = test(c) and true or false; no[c] = not yes[c] end
  CLASS[byte(letter)] = yes
  CLASS[byte(letter:upper())] = no
end

local function match_class(c, cl)
  local t = CLASS[cl]
  if t then return t[c] end
  return cl == c
end

local function class_end(ms, p)
  local pat, p_end = ms.pat, ms.p_end
  local c = byte(pat, p); p = p + 1
  if c == L_ESC then
    if p >= p_end then error("malformed pattern (ends with '%')", 0) end
    return p + 1
  elseif c == 91 then -- '['
    if byte(pat, p) == 94 then p = p + 1 end
    repeat
      if p >= p_end then error("malformed pattern (missing ']')", 0) end
      local cc = byte(pat, p); p = p + 1
      if cc == L_ESC and p < p_end then p = p + 1 end
    until byte(pat, p) == 93
    return p + 1
  end
  return p
end

local function match_bracket(pat, c, p, ec)
  local sig = true
  if byte(pat, p + 1) == 94 then sig = false; p = p + 1 end
  p = p + 1
  while p < ec do
    local pc = byte(pat, p)
    if pc == L_ESC then
      p = p + 1
      if match_class(c, byte(pat, p)) then return sig end
    elseif byte(pat, p + 1) == 45 and p + 2 < ec then
      p = p + 2
      if pc <= c and c <= byte(pat, p) then return sig end
    elseif pc == c then
      return sig
    end
    p = p + 1
  end
  return not sig
end

local function single_match(ms, s, p, ep)
  if s >= ms.src_end then return false end
  local c = byte(ms.src, s)
  local pc = byte(ms.pat, p)
  if pc == 46 then return true -- '.'
  elseif pc == L_ESC then return match_class(c, byte(ms.pat, p + 1))
  elseif pc == 91 then return match_bracket(ms.pat, c, p, ep - 1)
  end
  return pc == c
end

local do_match

local function match_balance(ms, s, p)
  if p >= ms.p_end - 1 then error("malformed pattern (missing arguments to '%b')", 0) end
  local src = ms.src
  if s >= ms.src_end or byte(src, s) ~= byte(ms.pat, p) then return nil end
  local b, e = byte(ms.pat, p), byte(ms.pat, p + 1)
  local cont = 1
  s = s + 1
  while s < ms.src_end do
    local c = byte(src, s)
    if c == e then
      cont = cont - 1
      if cont == 0 then return s + 1 end
    elseif c == b then
      cont = cont + 1
    end
    s = s + 1
  end
  return nil
end

local function max_expand(ms, s, p, ep)
  local i = 0
  while single_match(ms, s + i, p, ep) do i = i + 1 end
  while i >= 0 do
    local res = do_match(ms, s + i, ep + 1)
    if res then return res end
    i = i - 1
  end
  return nil
end

local function min_expand(ms, s, p, ep)
  while true do
    local res = do_match(ms, s, ep + 1)
    if res then return res end
    if single_match(ms, s, p, ep) then s = s + 1 else return nil end
  end
end

local function start_capture(ms, s, p, what)
  local level = ms.level
  if level >= MAXCAPTURES then error("too many captures", 0) end
  ms.cap_init[level + 1] = s
  ms.cap_len[level + 1] = what
  ms.level = level + 1
  local res = do_match(ms, s, p)
  if not res then ms.level = ms.level - 1 end
  return res
end

local function end_capture(ms, s, p)
  local l = nil
  for i = ms.level, 1, -1 do
    if ms.cap_len[i] == CAP_UNFINISHED then l = i; break end
  end
  if not l then error("invalid pattern capture", 0) end
  ms.cap_len[l] = s - ms.cap_init[l]
  local res = do_match(ms, s, p)
  if not res then ms.cap_len[l] = CAP_UNFINISHED end
  return res
end

local function check_capture(ms, l)
  l = l - 49 -- '1'
  if l < 0 or l >= ms.level or ms.cap_len[l + 1] == CAP_UNFINISHED then
    error(format("invalid capture index %%%d", l + 1), 0)
  end
  return l + 1
end

local function match_capture(ms, s, l)
  l = check_capture(ms, l)
  local len, init = ms.cap_len[l], ms.cap_init[l]
  if len >= 0 and ms.src_end - s >= len and sub(ms.src, init, init + len - 1) == sub(ms.src, s, s + len - 1) then
    return s + len
  end
  return nil
end

do_match = function(ms, s, p)
  ms.depth = ms.depth - 1
  if ms.depth == 0 then error("pattern too complex", 0) end
  local pat, p_end = ms.pat, ms.p_end
  while true do
    if p == p_end then break end
    local pc = byte(pat, p)
    local pn = byte(pat, p + 1)
    if pc == 40 then -- '('
      if pn == 41 then s = start_capture(ms, s, p + 2, CAP_POSITION)
      else s = start_capture(ms, s, p + 1, CAP_UNFINISHED) end
      break
    elseif pc == 41 then -- ')'
      s = end_capture(ms, s, p + 1)
      break
    elseif pc == 36 and p + 1 == p_end then -- '$' at the end
      if s ~= ms.src_end then s = nil end
      break
    elseif pc == L_ESC and pn == 98 then -- %b
      s = match_balance(ms, s, p + 2)
      if s == nil then break end
      p = p + 4
    elseif pc == L_ESC and pn == 102 then -- %f
      p = p + 2
      if byte(pat, p) ~= 91 then error("missing '[' after '%f' in pattern", 0) end
      local ep = class_end(ms, p)
      local prev = (s == 1) and 0 or byte(ms.src, s - 1)
      local cur = (s < ms.src_end) and byte(ms.src, s) or 0
      if match_bracket(pat, prev, p, ep - 1) or not match_bracket(pat, cur, p, ep - 1) then
        s = nil
        break
      end
      p = ep
    elseif pc == L_ESC and pn and pn >= 48 and pn <= 57 then -- back reference
      s = match_capture(ms, s, pn)
      if s == nil then break end
      p = p + 2
    else
      local ep = class_end(ms, p)
      local epc = byte(pat, ep)
      if not single_match(ms, s, p, ep) then
        if epc == 42 or epc == 63 or epc == 45 then -- '*' '?' '-' accept an empty match
          p = ep + 1
        else
          s = nil
          break
        end
      elseif epc == 63 then -- '?'
        local res = do_match(ms, s + 1, ep + 1)
        if res then s = res; break end
        p = ep + 1
      elseif epc == 43 then s = max_expand(ms, s + 1, p, ep); break -- '+'
      elseif epc == 42 then s = max_expand(ms, s, p, ep); break -- '*'
      elseif epc == 45 then s = min_expand(ms, s, p, ep); break -- '-'
      else
        s = s + 1
        p = ep
      end
    end
  end
  ms.depth = ms.depth + 1
  return s
end

local function new_state(src, pat, p)
  return { src = src, src_end = #src + 1, pat = pat, p_start = p, p_end = #pat + 1, level = 0,
           depth = MAXCCALLS, cap_init = {}, cap_len = {} }
end

local function reset(ms)
  ms.level = 0
  ms.depth = MAXCCALLS
end

local function one_capture(ms, i, s, e)
  if i >= ms.level then
    if i ~= 0 then error(format("invalid capture index %%%d", i + 1), 0) end
    return sub(ms.src, s, e - 1)
  end
  local len, init = ms.cap_len[i + 1], ms.cap_init[i + 1]
  if len == CAP_UNFINISHED then error("unfinished capture", 0) end
  if len == CAP_POSITION then return init end
  return sub(ms.src, init, init + len - 1)
end

local function captures(ms, s, e, whole)
  local n = (ms.level == 0 and whole) and 1 or ms.level
  local out = {}
  for i = 1, n do out[i] = one_capture(ms, i - 1, s, e) end
  return table.unpack(out, 1, n)
end

-- argument checks (the C functions' coercions: numbers are strings, integral floats are integers)
local function str_arg(v, i, fname)
  local t = type(v)
  if t == "string" then return v end
  if t == "number" then return tostring(v) end
  error(format("bad argument #%d to '%s' (string expected, got %s)", i, fname, t == "nil" and "no value" or t), 0)
end

local function int_arg(v, i, fname, default)
  if v == nil then return default end
  local n = v
  if type(n) == "string" then n = tonumber(n) end
  if type(n) ~= "number" then
    error(format("bad argument #%d to '%s' (number expected, got %s)", i, fname, type(v)), 0)
  end
  n = tointeger(n)
  if not n then error(format("bad argument #%d to '%s' (number has no integer representation)", i, fname), 0) end
  return n
end

local function posrelat(pos, len)
  if pos > 0 then return pos
  elseif pos == 0 then return 1
  elseif pos < -len then return 1 end
  return len + pos + 1
end

local function no_specials(p)
  for i = 1, #p do if SPECIAL[byte(p, i)] then return false end end
  return true
end

-- the pure-Lua functions ---------------------------------------------------------------------

local function lua_find(s, p, init, plain, find)
  local fname = find and "find" or "match"
  s, p = str_arg(s, 1, fname), str_arg(p, 2, fname)
  local ls = #s
  init = posrelat(int_arg(init, 3, fname, 1), ls)
  if init > ls + 1 then return nil end
  if find and (plain or no_specials(p)) then
    -- a plain search, step by step (the escaped text is a pattern without specials)
    local lp = #p
    if lp == 0 then return init, init - 1 end
    local first = byte(p, 1)
    for i = init, ls - lp + 1 do
      if byte(s, i) == first then
        local j = 1
        while j < lp and byte(s, i + j) == byte(p, j + 1) do j = j + 1 end
        if j == lp then return i, i + lp - 1 end
      end
    end
    return nil
  end
  local anchor = byte(p, 1) == 94
  local ms = new_state(s, p, anchor and 2 or 1)
  local s1 = init
  repeat
    reset(ms)
    local e = do_match(ms, s1, ms.p_start)
    if e then
      if find then return s1, e - 1, captures(ms, nil, 0, false) end
      return captures(ms, s1, e, true)
    end
    s1 = s1 + 1
  until s1 > ms.src_end or anchor
  return nil
end

local function lua_gmatch(s, p, init)
  s, p = str_arg(s, 1, "gmatch"), str_arg(p, 2, "gmatch")
  local ls = #s
  init = posrelat(int_arg(init, 3, "gmatch", 1), ls)
  if init > ls + 1 then init = ls + 2 end
  local ms = new_state(s, p, 1)
  local src, lastmatch = init, nil
  return function()
    while src <= ms.src_end do
      reset(ms)
      local e = do_match(ms, src, 1)
      if e and e ~= lastmatch then
        local start = src
        src, lastmatch = e, e
        return captures(ms, start, e, true)
      end
      src = src + 1
    end
    return nil
  end
end

local function add_s(ms, out, n, repl, s, e)
  local i, l = 1, #repl
  while i <= l do
    local c = byte(repl, i)
    if c == L_ESC then
      i = i + 1
      local d = byte(repl, i)
      if d == L_ESC then n = n + 1; out[n] = "%"
      elseif d == 48 then n = n + 1; out[n] = sub(ms.src, s, e - 1)
      elseif d and d >= 49 and d <= 57 then n = n + 1; out[n] = tostring(one_capture(ms, d - 49, s, e))
      else error("invalid use of '%' in replacement string", 0) end
      i = i + 1
    else
      local j = i
      while j <= l and byte(repl, j) ~= L_ESC do j = j + 1 end
      n = n + 1; out[n] = sub(repl, i, j - 1)
      i = j
    end
  end
  return n
end

local function lua_gsub(s, p, repl, max_n)
  s, p = str_arg(s, 1, "gsub"), str_arg(p, 2, "gsub")
  local tr = type(repl)
  if tr ~= "number" and tr ~= "string" and tr ~= "function" and tr ~= "table" then
    error(format("bad argument #3 to 'gsub' (string/function/table expected, got %s)",
      tr == "nil" and "no value" or tr), 0)
  end
  if tr == "number" then repl = tostring(repl); tr = "string" end
  max_n = int_arg(max_n, 4, "gsub", #s + 1)
  local anchor = byte(p, 1) == 94
  local ms = new_state(s, p, anchor and 2 or 1)
  local out, n, count, changed = {}, 0, 0, false
  local src, lastmatch, copied = 1, nil, 1
  while count < max_n do
    reset(ms)
    local e = do_match(ms, src, ms.p_start)
    if e and e ~= lastmatch then
      count = count + 1
      if copied < src then n = n + 1; out[n] = sub(s, copied, src - 1) end
      if tr == "string" then
        n = add_s(ms, out, n, repl, src, e)
        changed = true
      else
        local v
        if tr == "function" then v = repl(captures(ms, src, e, true))
        else v = repl[one_capture(ms, 0, src, e)] end
        if not v then
          n = n + 1; out[n] = sub(s, src, e - 1)
        elseif type(v) == "string" or type(v) == "number" then
          n = n + 1; out[n] = tostring(v)
          changed = true
        else
          error(format("invalid replacement value (a %s)", type(v)), 0)
        end
      end
      src, lastmatch, copied = e, e, e
    elseif src < ms.src_end then
      src = src + 1
    else
      break
    end
    if anchor then break end
  end
  if not changed then return s, count end
  if copied <= #s then n = n + 1; out[n] = sub(s, copied) end
  return concat(out, "", 1, n), count
end

-- the cost bound ------------------------------------------------------------------------------

local cost_cache, cost_cached = {}, 0

-- 256-entry set of the bytes one single-character item matches, or nil when not one.
local function item_set(ms, p, ep)
  local set = {}
  local c = byte(ms.pat, p)
  for b = 0, 255 do
    if c == 46 then set[b] = true
    elseif c == L_ESC then set[b] = match_class(b, byte(ms.pat, p + 1))
    elseif c == 91 then set[b] = match_bracket(ms.pat, b, p, ep - 1)
    else set[b] = (c == b) end
  end
  return set
end

local function disjoint(a, b)
  for i = 0, 255 do if a[i] and b[i] then return false end end
  return true
end

-- Shape of a pattern: the number of backtracking quantifiers (each may retry every position),
-- the number of '?' items (each doubles the paths), scans (%b and back references), whether it
-- is anchored and its literal prefix. Returns nil for a malformed pattern (C reports it).
local function shape(p, mode)
  local key = mode .. p
  local hit = cost_cache[key]
  if hit then return hit end
  local ms = new_state("", p, 1)
  local i, m = 1, #p
  local anchored = mode ~= "gmatch" and byte(p, 1) == 94
  if anchored then i = 2 end
  local k, q, prefix, in_prefix, scans = 0, 0, {}, true, false
  local items = {}
  while i <= m do
    local c, d = byte(p, i), byte(p, i + 1)
    if c == 40 or c == 41 then
      i = i + 1
      in_prefix = false
    elseif c == 36 and i == m then
      i = i + 1
    elseif c == L_ESC and d == 98 then
      k = k + 1; i = i + 4; in_prefix = false; scans = true
    elseif c == L_ESC and d == 102 then
      i = i + 2
      if byte(p, i) ~= 91 then return nil end
      i = class_end(ms, i); in_prefix = false; scans = true
    elseif c == L_ESC and d and d >= 48 and d <= 57 then
      k = k + 1; i = i + 2; in_prefix = false; scans = true
    else
      local ep = class_end(ms, i)
      local qc = byte(p, ep)
      local quant = qc == 42 or qc == 43 or qc == 45 or qc == 63
      if in_prefix and not quant and #prefix < 16 and c ~= 91 and c ~= 46
          and (c ~= L_ESC or not (isalpha(d) or isdigit(d))) then
        prefix[#prefix + 1] = char(c == L_ESC and d or c)
      else
        in_prefix = false
      end
      items[#items + 1] = { p = i, ep = ep, quant = quant and qc or nil }
      i = quant and ep + 1 or ep
    end
  end
  -- A quantifier followed by nothing but ')' / '$', or by a single item it cannot match that
  -- must match once, never retries usefully: its cost is one scan, not a factor.
  for j, it in ipairs(items) do
    if it.quant == 63 then
      q = q + 1
    elseif it.quant then
      local nxt = items[j + 1]
      local cheap = false
      if not scans then
        if nxt == nil then
          cheap = true
        elseif nxt.quant == nil or nxt.quant == 43 then
          cheap = disjoint(item_set(ms, it.p, it.ep), item_set(ms, nxt.p, nxt.ep))
        end
      end
      if not cheap then k = k + 1 end
    end
  end
  local sh = { k = k, q = q, anchored = anchored, prefix = concat(prefix), m = m }
  if cost_cached > 512 then cost_cache, cost_cached = {}, 0 end
  cost_cached = cost_cached + 1
  cost_cache[key] = sh
  return sh
end

-- Candidate start positions: how often the literal prefix occurs (C plain find, capped).
local function starts(s, prefix, n)
  if prefix == "" then return n + 1 end
  local count, pos = 0, 1
  while count <= 64 do
    local a = C_find(s, prefix, pos, true)
    if not a then return count + 1 end
    count, pos = count + 1, a + 1
  end
  return n + 1
end

local function cheap(s, p, mode, plain)
  if type(s) ~= "string" or type(p) ~= "string" then
    if type(s) == "number" then s = tostring(s) end
    if type(p) == "number" then p = tostring(p) end
    if type(s) ~= "string" or type(p) ~= "string" then return true end -- C raises the error
  end
  local n = #s
  if plain or (mode == "find" and no_specials(p)) then
    -- C compares the needle at each place its first byte occurs
    return (n + 1) * (#p + 1) <= fast_cost or starts(s, sub(p, 1, 16), n) * (#p + 1) <= fast_cost
  end
  local ok, sh = pcall(shape, p, mode)
  if not ok or sh == nil then return true end -- malformed: C raises the error at once
  local paths = (n + 2) ^ sh.k * 2 ^ sh.q * (sh.m + 1)
  if sh.anchored then return paths + n <= fast_cost end
  return (n + 1) * paths + n <= fast_cost or starts(s, sh.prefix, n) * paths + n <= fast_cost
end

local M = {}

function M.find(s, p, init, plain)
  if cheap(s, p, "find", plain) then return C_find(s, p, init, plain) end
  return lua_find(s, p, init, plain, true)
end

function M.match(s, p, init)
  if cheap(s, p, "match", false) then return C_match(s, p, init) end
  return lua_find(s, p, init, false, false)
end

function M.gmatch(s, p, init)
  if cheap(s, p, "gmatch", false) then return C_gmatch(s, p, init) end
  return lua_gmatch(s, p, init)
end

function M.gsub(s, p, repl, n)
  if cheap(s, p, "gsub", false) then return C_gsub(s, p, repl, n) end
  return lua_gsub(s, p, repl, n)
end

-- the pure-Lua versions, for tests that compare them with the C functions
M.lua = { find = function(s, p, i, pl) return lua_find(s, p, i, pl, true) end,
          match = function(s, p, i) return lua_find(s, p, i, false, false) end,
          gmatch = lua_gmatch, gsub = lua_gsub }

return M

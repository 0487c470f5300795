-- CLIP (specs/clip.md §4; docs/wire.md "CLIP") for Wireshark.
--   * The data-plane shim, EtherType 0xC11C (inca's choice; the spec's
--     0x88B5 is taken): the 16-byte common header, the params region
--     (hdr_words * 4 - 16 bytes; the §4.3 fields of apps 2 MFWD, 3 SNAT
--     and 4 TRD decoded, request fields in requests, response fields in
--     OK responses), then the original packet, handed to the dissector of
--     `load_type`.
--   * CLIP-CTL on UDP ports 47100 (controller) and 47101 (servers): the
--     12-byte header and every type's payload; an empty payload with
--     REPLY is a bare acknowledgement.
--   * The pin-overflow digest (§4.4) never crosses a link (switch driver to
--     controller), so it has no dissector.
-- Filter names are `clipshim.*` and `clipctl.*`: Wireshark's own `clip` is
-- Classical IP over ATM.
--   tshark -X lua_script:contrib/wireshark/clip.lua -r capture.pcap

local ETHERTYPE = 0xC11C
local CONTROLLER_PORT = 47100
local SERVER_PORT = 47101
local COMMON_LEN = 16
local CTL_HEADER = 12
local CTL_MAGIC = 0xC11C

------------------------------------------------------------------------
-- Data-plane shim
------------------------------------------------------------------------

local clip = Proto("clipshim", "CLIP shim")
local kinds = { [1] = "REQUEST", [2] = "RESPONSE" }
local sels = { [0] = "PIN_TABLE", [1] = "PIN_CACHE", [2] = "PREV", [3] = "CUR", [4] = "HINT" }
local statuses = { [0] = "OK", [1] = "DROP", [2] = "NO_RESULT" }
local apps = { [1] = "NULL", [2] = "MFWD", [3] = "SNAT", [4] = "TRD" }
-- §4.3: the params length P of each app.
local app_p = { [1] = 0, [2] = 16, [3] = 16, [4] = 28 }

local f = clip.fields
f.version = ProtoField.uint8("clipshim.version", "Version", base.DEC, nil, 0xF0)
f.kind = ProtoField.uint8("clipshim.kind", "Kind", base.DEC, kinds, 0x0F)
f.flags = ProtoField.uint8("clipshim.flags", "Flags", base.HEX)
f.cms_valid = ProtoField.bool("clipshim.flags.cms_valid", "CMS_VALID", 8, nil, 0x80)
f.hinted = ProtoField.bool("clipshim.flags.hinted", "HINTED", 8, nil, 0x40)
f.rec = ProtoField.bool("clipshim.flags.rec", "REC", 8, nil, 0x20)
f.load_type = ProtoField.uint16("clipshim.load_type", "Load type (original EtherType)", base.HEX)
f.app_id = ProtoField.uint8("clipshim.app_id", "App id", base.DEC, apps)
f.hdr_words = ProtoField.uint8("clipshim.hdr_words", "Header words", base.DEC)
f.parsed_len = ProtoField.uint16("clipshim.parsed_len", "Parsed length", base.DEC)
f.server_id = ProtoField.uint8("clipshim.server_id", "Server id", base.DEC)
f.sel = ProtoField.uint8("clipshim.sel", "Selection", base.DEC, sels, 0xE0)
f.status = ProtoField.uint8("clipshim.status", "Status", base.DEC, statuses, 0x18)
f.reserved = ProtoField.uint8("clipshim.reserved", "Reserved", base.HEX, nil, 0x07)
f.grp_ver = ProtoField.uint16("clipshim.grp_ver", "Group version", base.DEC)
f.cms_est = ProtoField.uint32("clipshim.cms_est", "CMS estimate", base.DEC)
f.params = ProtoField.bytes("clipshim.params", "Params")
-- FlowKey (§4.1), also used by CLIP-CTL.
f.flow = ProtoField.bytes("clipshim.flow", "FlowKey")
f.flow_ctx = ProtoField.uint24("clipshim.flow.ctx", "Context (VNI)", base.DEC)
f.flow_proto = ProtoField.uint8("clipshim.flow.proto", "Protocol", base.DEC)
f.flow_src = ProtoField.ipv4("clipshim.flow.src_ip", "Source address")
f.flow_dst = ProtoField.ipv4("clipshim.flow.dst_ip", "Destination address")
f.flow_sport = ProtoField.uint16("clipshim.flow.src_port", "Source port", base.DEC)
f.flow_dport = ProtoField.uint16("clipshim.flow.dst_port", "Destination port", base.DEC)
-- §4.3 app params.
f.nexthop_id = ProtoField.uint16("clipshim.mfwd.nexthop_id", "Next hop id", base.DEC)
f.hit = ProtoField.uint8("clipshim.mfwd.hit", "Hit", base.DEC)
f.pub_ip = ProtoField.ipv4("clipshim.snat.pub_ip", "Public address")
f.pub_port = ProtoField.uint16("clipshim.snat.pub_port", "Public port", base.DEC)
f.tcp_flags = ProtoField.uint8("clipshim.trd.tcp_flags", "TCP flags", base.HEX)
f.seq = ProtoField.uint32("clipshim.trd.seq", "Sequence", base.DEC)
f.seq_end = ProtoField.uint32("clipshim.trd.seq_end", "Sequence end", base.DEC)
f.payload_len = ProtoField.uint16("clipshim.trd.payload_len", "Payload length", base.DEC)
f.idx = ProtoField.uint16("clipshim.trd.idx", "Connection index", base.DEC)
f.op = ProtoField.uint8("clipshim.trd.op", "Register op", base.DEC)
f.retx = ProtoField.uint8("clipshim.trd.retx", "Retransmission", base.DEC)
f.init_end = ProtoField.uint32("clipshim.trd.init_end", "Initial end", base.DEC)

local clip_malformed = ProtoExpert.new("clipshim.malformed", "Malformed CLIP shim",
  expert.group.MALFORMED, expert.severity.ERROR)
clip.experts = { clip_malformed }

local ethertype_table = DissectorTable.get("ethertype")
local data_dissector = Dissector.get("data")

-- A FlowKey at `off` of `tvb` (16 bytes, checked by the caller).
local function add_flow(tree, tvb, off)
  local t = tree:add(f.flow, tvb(off, 16))
  t:add(f.flow_ctx, tvb(off, 3))
  t:add(f.flow_proto, tvb(off + 3, 1))
  t:add(f.flow_src, tvb(off + 4, 4))
  t:add(f.flow_dst, tvb(off + 8, 4))
  t:add(f.flow_sport, tvb(off + 12, 2))
  t:add(f.flow_dport, tvb(off + 14, 2))
end

-- The §4.3 fields of `app` in params `p` (a Tvb of at least the app's P bytes).
-- Every field of the four apps is byte-aligned once bit-packed.
local function app_params(app, kind, status, p, t)
  if kind == 1 then
    if app == 2 or app == 3 or app == 4 then add_flow(t, p, 0) end
    if app == 4 then
      t:add(f.tcp_flags, p(16, 1))
      t:add(f.seq, p(17, 4))
      t:add(f.seq_end, p(21, 4))
      t:add(f.payload_len, p(25, 2))
    end
  elseif kind == 2 and status == 0 then
    if app == 2 then
      t:add(f.nexthop_id, p(0, 2))
      t:add(f.hit, p(2, 1))
    elseif app == 3 then
      t:add(f.pub_ip, p(0, 4))
      t:add(f.pub_port, p(4, 2))
    elseif app == 4 then
      t:add(f.idx, p(0, 2))
      t:add(f.op, p(2, 1))
      t:add(f.retx, p(3, 1))
      t:add(f.init_end, p(4, 4))
      t:add(f.seq_end, p(8, 4))
    end
  end
end

function clip.dissector(buf, pinfo, tree)
  local n = buf:len()
  pinfo.cols.protocol = "CLIP"
  if n < COMMON_LEN then
    local t = tree:add(clip, buf())
    t:add_proto_expert_info(clip_malformed, "Shorter than the 16-byte common header")
    pinfo.cols.info = "CLIP [truncated]"
    return n
  end
  local version, kind = buf(0, 1):bitfield(0, 4), buf(0, 1):bitfield(4, 4)
  local sel, status = buf(9, 1):bitfield(0, 3), buf(9, 1):bitfield(3, 2)
  local app, words = buf(4, 1):uint(), buf(5, 1):uint()
  local hlen = words * 4
  local t = tree:add(clip, buf(0, math.min(math.max(hlen, COMMON_LEN), n)))
  t:add(f.version, buf(0, 1))
  t:add(f.kind, buf(0, 1))
  local fl = t:add(f.flags, buf(1, 1))
  fl:add(f.cms_valid, buf(1, 1))
  fl:add(f.hinted, buf(1, 1))
  fl:add(f.rec, buf(1, 1))
  t:add(f.load_type, buf(2, 2))
  t:add(f.app_id, buf(4, 1))
  t:add(f.hdr_words, buf(5, 1))
  t:add(f.parsed_len, buf(6, 2))
  t:add(f.server_id, buf(8, 1))
  t:add(f.sel, buf(9, 1))
  t:add(f.status, buf(9, 1))
  t:add(f.reserved, buf(9, 1))
  t:add(f.grp_ver, buf(10, 2))
  t:add(f.cms_est, buf(12, 4))
  local info = "CLIP " .. (kinds[kind] or ("kind " .. kind)) .. " app=" .. (apps[app] or app)
    .. " srv=" .. buf(8, 1):uint() .. " sel=" .. (sels[sel] or sel)
  if kind == 2 then info = info .. " status=" .. (statuses[status] or status) end
  if version ~= 1 or kinds[kind] == nil or sels[sel] == nil or statuses[status] == nil then
    t:add_proto_expert_info(clip_malformed, "Bad version, kind, sel or status")
    pinfo.cols.info = info .. " [malformed]"
    return n
  end
  if hlen < COMMON_LEN or hlen > n then
    t:add_proto_expert_info(clip_malformed,
      hlen < COMMON_LEN and "hdr_words below 4" or "Params region cut short")
    pinfo.cols.info = info .. " [malformed]"
    return n
  end
  local plen = hlen - COMMON_LEN
  if plen > 0 then
    local pt = t:add(f.params, buf(COMMON_LEN, plen))
    local p = buf(COMMON_LEN, plen):tvb()
    local want = app_p[app]
    if want ~= nil and plen < want then
      pt:add_proto_expert_info(clip_malformed, "Params shorter than the app's P")
    elseif want ~= nil then
      app_params(app, kind, status, p, pt)
    end
  end
  pinfo.cols.info = info
  if n > hlen then
    local rest = buf(hlen):tvb()
    if not ethertype_table:try(buf(2, 2):uint(), rest, pinfo, tree) then
      data_dissector:call(rest, pinfo, tree)
    end
    -- Keep the shim visible in front of what the inner dissectors wrote.
    pinfo.cols.info = info .. " | " .. tostring(pinfo.cols.info)
  end
  return n
end

ethertype_table:add(ETHERTYPE, clip)

------------------------------------------------------------------------
-- CLIP-CTL
------------------------------------------------------------------------

local ctl = Proto("clipctl", "CLIP-CTL")
local msg_types = {
  [0x01] = "REGISTER", [0x03] = "HEARTBEAT",
  [0x10] = "MIRROR_INSERT", [0x11] = "MIRROR_DELETE", [0x12] = "ENTRY_CREATED",
  [0x13] = "ENTRY_OFFLOADED", [0x14] = "ENTRY_EXPIRED",
  [0x20] = "TOPN_REQUEST", [0x21] = "TOPN_REPORT",
  [0x30] = "FLOW_QUERY", [0x31] = "FLOW_QUERY_REPLY", [0x32] = "FLOW_EXPIRED",
  [0x40] = "POOL_ASSIGN", [0x41] = "CONN_NEW", [0x42] = "CONN_RELEASE",
}
local pool_kinds = { [1] = "SNAT ports", [2] = "TRD indices" }

local cf = ctl.fields
cf.magic = ProtoField.uint16("clipctl.magic", "Magic", base.HEX)
cf.version = ProtoField.uint8("clipctl.version", "Version", base.DEC)
cf.type = ProtoField.uint8("clipctl.type", "Type", base.HEX, msg_types)
cf.txn_id = ProtoField.uint32("clipctl.txn_id", "Transaction id", base.DEC)
cf.length = ProtoField.uint16("clipctl.length", "Payload length", base.DEC)
cf.sender = ProtoField.uint8("clipctl.sender", "Sender (0 = controller)", base.DEC)
cf.flags = ProtoField.uint8("clipctl.flags", "Flags", base.HEX)
cf.reply = ProtoField.bool("clipctl.flags.reply", "REPLY", 8, nil, 0x01)
cf.more = ProtoField.bool("clipctl.flags.more", "MORE", 8, nil, 0x02)
cf.server_id = ProtoField.uint8("clipctl.server_id", "Server id", base.DEC)
cf.n_cores = ProtoField.uint8("clipctl.n_cores", "Cores", base.DEC)
cf.mac = ProtoField.ether("clipctl.mac", "MAC address")
cf.switch_port = ProtoField.uint16("clipctl.switch_port", "Switch port", base.DEC)
cf.timestamp = ProtoField.uint64("clipctl.timestamp_ns", "Timestamp (ns)", base.DEC)
cf.table_id = ProtoField.uint8("clipctl.table_id", "Table", base.DEC)
cf.count = ProtoField.uint16("clipctl.count", "Count", base.DEC)
cf.key = ProtoField.bytes("clipctl.key", "Key")
cf.action_id = ProtoField.uint8("clipctl.action_id", "Action", base.DEC)
cf.data = ProtoField.bytes("clipctl.data", "Action data")
cf.period_id = ProtoField.uint32("clipctl.period_id", "Period", base.DEC)
cf.n = ProtoField.uint16("clipctl.n", "N", base.DEC)
cf.est = ProtoField.uint32("clipctl.est", "Estimate", base.DEC)
cf.grp_ver = ProtoField.uint16("clipctl.grp_ver", "Group version", base.DEC)
cf.first_seen = ProtoField.uint64("clipctl.first_seen", "First seen (ns)", base.DEC)
cf.last_seen = ProtoField.uint64("clipctl.last_seen", "Last seen (ns)", base.DEC)
cf.offloaded = ProtoField.uint8("clipctl.offloaded", "Offloaded", base.DEC)
cf.app_id = ProtoField.uint8("clipctl.app_id", "App id", base.DEC, apps)
cf.pool_kind = ProtoField.uint8("clipctl.pool_kind", "Pool kind", base.DEC, pool_kinds)
cf.base_ip = ProtoField.ipv4("clipctl.base_ip", "Base address")
cf.lo = ProtoField.uint32("clipctl.lo", "Low", base.DEC)
cf.hi = ProtoField.uint32("clipctl.hi", "High", base.DEC)
cf.idx = ProtoField.uint16("clipctl.idx", "Index", base.DEC)

local ctl_malformed = ProtoExpert.new("clipctl.malformed", "Malformed CLIP-CTL message",
  expert.group.MALFORMED, expert.severity.ERROR)
ctl.experts = { ctl_malformed }

-- A payload reader: every read checks the bounds and turns an overrun
-- into `nil`, which ends the payload with a malformed mark.
local function reader(body, tree)
  local r = { off = 0 }
  function r.fixed(field, n)
    if r.off + n > body:len() then return nil end
    local range = body(r.off, n)
    tree:add(field, range)
    r.off = r.off + n
    return range
  end
  -- `len` 8 ‖ bytes (an empty key is a zero-length field after its len).
  function r.key(field)
    if r.off + 1 > body:len() then return nil end
    local n = body(r.off, 1):uint()
    if r.off + 1 + n > body:len() then return nil end
    tree:add(field, body(r.off + 1, n))
    r.off = r.off + 1 + n
    return n
  end
  function r.flow()
    if r.off + 16 > body:len() then return nil end
    add_flow(tree, body, r.off)
    r.off = r.off + 16
    return true
  end
  return r
end

-- Dissects a payload; false if it ran out of bytes or has bad values.
local function payload_fields(ty, body, tree)
  local r = reader(body, tree)
  local n
  if ty == 0x01 then
    if not (r.fixed(cf.server_id, 1) and r.fixed(cf.n_cores, 1) and r.fixed(cf.mac, 6)
        and r.fixed(cf.switch_port, 2)) then return false end
  elseif ty == 0x03 then
    if not r.fixed(cf.timestamp, 8) then return false end
  elseif ty == 0x10 or ty == 0x12 then
    n = r.fixed(cf.table_id, 1) and r.fixed(cf.count, 2)
    if not n then return false end
    for _ = 1, n:uint() do
      if not (r.key(cf.key) and r.fixed(cf.action_id, 1) and r.key(cf.data)) then
        return false
      end
    end
  elseif ty == 0x11 or ty == 0x13 or ty == 0x14 then
    n = r.fixed(cf.table_id, 1) and r.fixed(cf.count, 2)
    if not n then return false end
    for _ = 1, n:uint() do
      if not r.key(cf.key) then return false end
    end
  elseif ty == 0x20 then
    if not (r.fixed(cf.period_id, 4) and r.fixed(cf.n, 2)) then return false end
  elseif ty == 0x21 then
    n = r.fixed(cf.period_id, 4) and r.fixed(cf.count, 2)
    if not n then return false end
    for _ = 1, n:uint() do
      if not (r.flow() and r.fixed(cf.est, 4)) then return false end
    end
  elseif ty == 0x30 then
    if not r.fixed(cf.grp_ver, 2) then return false end
  elseif ty == 0x31 then
    n = r.fixed(cf.count, 2)
    if not n then return false end
    for _ = 1, n:uint() do
      local o = r.flow() and r.fixed(cf.first_seen, 8) and r.fixed(cf.last_seen, 8)
        and r.fixed(cf.offloaded, 1)
      if not o or o:uint() > 1 then return false end
    end
  elseif ty == 0x32 then
    n = r.fixed(cf.count, 2)
    if not n then return false end
    for _ = 1, n:uint() do
      if not r.flow() then return false end
    end
  elseif ty == 0x40 then
    local k = r.fixed(cf.app_id, 1) and r.fixed(cf.pool_kind, 1)
    if not (k and pool_kinds[k:uint()] and r.fixed(cf.base_ip, 4) and r.fixed(cf.lo, 4)
        and r.fixed(cf.hi, 4)) then return false end
  elseif ty == 0x41 or ty == 0x42 then
    if not (r.flow() and r.fixed(cf.idx, 2)) then return false end
  end
  -- Strict, as the decoder: no bytes after the last field.
  return r.off == body:len()
end

function ctl.dissector(buf, pinfo, tree)
  local n = buf:len()
  pinfo.cols.protocol = "CLIP-CTL"
  local t = tree:add(ctl, buf())
  if n < CTL_HEADER then
    t:add_proto_expert_info(ctl_malformed, "Shorter than the 12-byte header")
    pinfo.cols.info = "CLIP-CTL [truncated]"
    return n
  end
  t:add(cf.magic, buf(0, 2))
  t:add(cf.version, buf(2, 1))
  t:add(cf.type, buf(3, 1))
  t:add(cf.txn_id, buf(4, 4))
  t:add(cf.length, buf(8, 2))
  t:add(cf.sender, buf(10, 1))
  local fl = t:add(cf.flags, buf(11, 1))
  fl:add(cf.reply, buf(11, 1))
  fl:add(cf.more, buf(11, 1))
  local ty, len, flags = buf(3, 1):uint(), buf(8, 2):uint(), buf(11, 1):uint()
  local reply, more = flags % 2 == 1, math.floor(flags / 2) % 2 == 1
  local name = msg_types[ty] or string.format("type 0x%02x", ty)
  local info = "CLIP-CTL " .. name
  if reply and len == 0 then info = "CLIP-CTL ACK of " .. name end
  info = info .. " txn=" .. buf(4, 4):uint() .. " from " .. buf(10, 1):uint()
  if reply then info = info .. " [REPLY]" end
  if more then info = info .. " [MORE]" end
  pinfo.cols.info = info
  if buf(0, 2):uint() ~= CTL_MAGIC or buf(2, 1):uint() ~= 1 or msg_types[ty] == nil
      or flags > 3 then
    t:add_proto_expert_info(ctl_malformed, "Bad magic, version, type or flags")
    return n
  end
  if n ~= CTL_HEADER + len then
    t:add_proto_expert_info(ctl_malformed, "Datagram length is not 12 + payload length")
    return n
  end
  if len == 0 then
    if not reply then
      t:add_proto_expert_info(ctl_malformed, "Empty payload without REPLY")
    end
    return n
  end
  if not payload_fields(ty, buf(CTL_HEADER, len):tvb(), t) then
    t:add_proto_expert_info(ctl_malformed)
  end
  return n
end

DissectorTable.get("udp.port"):add(CONTROLLER_PORT, ctl)
DissectorTable.get("udp.port"):add(SERVER_PORT, ctl)

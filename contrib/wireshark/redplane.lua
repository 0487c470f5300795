-- RedPlane (specs/redplane.md §4; docs/wire.md "RedPlane") for Wireshark.
-- Requests go to UDP 8000-8063 from UDP 4000; acks and HEAD_ANNOUNCE go to
-- UDP 4000. K (key bytes) and V (value bytes) depend on the app and are
-- preferences (Edit > Preferences > Protocols > RedPlane); the default is the
-- NAT, K = 6, V = 6. The piggybacked packet is handed to the IPv4 dissector.
--   tshark -X lua_script:contrib/wireshark/redplane.lua -r capture.pcap

local p = Proto("redplane", "RedPlane")

local req_types = {
  [0x00] = "LEASE_NEW_REQ", [0x01] = "LEASE_RENEW_REQ",
  [0x02] = "BUF_READ_REQ",  [0x03] = "SNAPSHOT_REQ",
}
local ack_types = {
  [0x00] = "LEASE_NEW_ACK", [0x01] = "LEASE_RENEW_ACK", [0x02] = "LEASE_MIGRATE_ACK",
  [0x03] = "BUF_READ_ACK",  [0x04] = "SNAPSHOT_ACK",    [0x05] = "LEASE_REJECT",
  [0x06] = "SNAPSHOT_RESTORE", [0x20] = "HEAD_ANNOUNCE",
}

local f = p.fields
f.req_type = ProtoField.uint8("redplane.req_type", "Request type", base.HEX, req_types)
f.ack_type = ProtoField.uint8("redplane.ack_type", "Ack type", base.HEX, ack_types)
f.seq = ProtoField.uint16("redplane.seq", "Sequence", base.DEC)
f.key = ProtoField.bytes("redplane.key", "Key")
f.value = ProtoField.bytes("redplane.value", "Value")
f.piggyback_len = ProtoField.uint16("redplane.piggyback_len", "Piggybacked packet length", base.DEC)
f.version = ProtoField.uint32("redplane.config_version", "Config version", base.DEC)
f.old_head = ProtoField.ipv4("redplane.old_head", "Old head")
f.new_head = ProtoField.ipv4("redplane.new_head", "New head")

p.prefs.k = Pref.uint("Key bytes (K)", 6, "Key width of the app on these ports")
p.prefs.v = Pref.uint("Value bytes (V)", 6, "Value width of the app on these ports")

local ip_dissector = Dissector.get("ip")

local function piggyback(buf, pinfo, tree, off)
  local rest = buf:len() - off
  if rest > 0 then
    tree:add(f.piggyback_len, rest)
    ip_dissector:call(buf(off):tvb(), pinfo, tree)
  end
end

function p.dissector(buf, pinfo, tree)
  local k, v = p.prefs.k, p.prefs.v
  if buf:len() < 3 then return 0 end
  local udp_dst = pinfo.dst_port
  pinfo.cols.protocol = "RedPlane"
  local t = tree:add(p, buf())
  local code = buf(0, 1):uint()
  if udp_dst == 4000 then
    if code == 0x20 then
      if buf:len() < 13 then return 0 end
      t:add(f.ack_type, buf(0, 1))
      t:add(f.version, buf(1, 4))
      t:add(f.old_head, buf(5, 4))
      t:add(f.new_head, buf(9, 4))
      pinfo.cols.info = "HEAD_ANNOUNCE " .. tostring(buf(5, 4):ipv4()) .. " -> " .. tostring(buf(9, 4):ipv4())
      return 13
    end
    if ack_types[code] == nil or buf:len() < 3 + k then return 0 end
    t:add(f.ack_type, buf(0, 1))
    t:add(f.seq, buf(1, 2))
    t:add(f.key, buf(3, k))
    local off = 3 + k
    if code == 0x00 or code == 0x02 or code == 0x06 then
      if buf:len() < off + v then return 0 end
      t:add(f.value, buf(off, v))
      off = off + v
    end
    pinfo.cols.info = ack_types[code] .. " seq=" .. buf(1, 2):uint()
    piggyback(buf, pinfo, tree, off)
  else
    if req_types[code] == nil or buf:len() < 3 + k + v then return 0 end
    t:add(f.req_type, buf(0, 1))
    t:add(f.seq, buf(1, 2))
    t:add(f.key, buf(3, k))
    t:add(f.value, buf(3 + k, v))
    pinfo.cols.info = req_types[code] .. " seq=" .. buf(1, 2):uint()
    piggyback(buf, pinfo, tree, 3 + k + v)
  end
  return buf:len()
end

local udp = DissectorTable.get("udp.port")
udp:add(4000, p)
for port = 8000, 8063 do udp:add(port, p) end

-- tshark post-dissector: Wireshark 4.0's InfiniBand dissector shows the
-- Invariant CRC but never verifies it, so this recomputes it inside tshark,
-- independently of the Rust code, per IBA Annex A17 (RoCEv2 over IPv4):
-- CRC-32 (reflected 0xEDB88320, init/final 0xFFFFFFFF) over 8 x 0xFF, the
-- IPv4 header with TOS, TTL and checksum as ones, the UDP header with its
-- checksum as ones, the BTH with byte 4 as ones, and the rest up to the ICRC.
-- The computed value is compared with the last 4 bytes of the UDP payload
-- read least-significant byte first.
local p = Proto("inca_icrc", "inca ICRC check (IBA Annex A17)")
local f_status = ProtoField.string("inca_icrc.status", "ICRC status")
local f_computed = ProtoField.uint32("inca_icrc.computed", "Computed ICRC", base.HEX)
p.fields = { f_status, f_computed }

local udp_dport = Field.new("udp.dstport")

local tbl = {}
for i = 0, 255 do
  local c = i
  for _ = 1, 8 do
    if bit32.band(c, 1) == 1 then c = bit32.bxor(bit32.rshift(c, 1), 0xEDB88320) else c = bit32.rshift(c, 1) end
  end
  tbl[i] = c
end

local function step(crc, b)
  return bit32.bxor(tbl[bit32.band(bit32.bxor(crc, b), 0xFF)], bit32.rshift(crc, 8))
end

function p.dissector(tvb, pinfo, tree)
  local d = udp_dport()
  if d == nil or d.value ~= 4791 then return end
  local off = 12
  local et = tvb(off, 2):uint()
  off = off + 2
  if et == 0x8100 then et = tvb(off + 2, 2):uint(); off = off + 4 end
  if et ~= 0x0800 then return end
  local ihl = bit32.band(tvb(off, 1):uint(), 0x0F) * 4
  local total = tvb(off + 2, 2):uint()
  local bytes = tvb(off, total):bytes()
  local masked = { [1] = true, [8] = true, [10] = true, [11] = true,
                   [ihl + 6] = true, [ihl + 7] = true, [ihl + 8 + 4] = true }
  local crc = 0xFFFFFFFF
  for _ = 1, 8 do crc = step(crc, 0xFF) end
  for i = 0, total - 5 do
    local b = bytes:get_index(i)
    if masked[i] then b = 0xFF end
    crc = step(crc, b)
  end
  crc = bit32.bxor(crc, 0xFFFFFFFF)
  local wire = tvb(off + total - 4, 4):le_uint()
  local t = tree:add(p, tvb(off + total - 4, 4))
  t:add(f_computed, crc)
  t:add(f_status, crc == wire and "good" or "bad")
end

register_postdissector(p)

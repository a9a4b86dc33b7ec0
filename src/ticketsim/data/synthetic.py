"""The seeded generator of the embedded synthetic industrial ticket corpus (tickets, lay queries, graded pairs).

The paper's ticket data is private, so this module writes a stand-in from a small industrial fault taxonomy kept
here as Python data: components (turbines, pumps, compressors, drives, PLCs, sensors, HVAC, SCADA, ...) and fault
types (overheating, leakage, vibration, communication loss, ...). Every plausible (component, fault type) pair is a
*fault class* with its own error codes, typical measurement, part numbers, parameter ids and a canonical solution
procedure. Tickets are technical write-ups of one class; queries are short lay descriptions of one class, using
synonyms, abbreviations and misspellings that no ticket contains, so word overlap is a weak guide.

Labels of a query about class (component C, fault F) against a ticket of class (C', F'):
    YES (5)  C' == C and F' == F: the ticket's solution fixes the query.
    REL (3)  C' == C and F' != F (same equipment, other fault), or
             F' == F and C' is closely related to C (same equipment cluster, e.g. motor / frequency converter).
    NO  (1)  everything else. Labelled NO candidates are mostly hard: the same fault type on an unrelated component,
             or the tickets sharing the most words with the query text.
End-user queries (split "test") list every YES ticket and the REL tickets of the same component; the rest of the
pool counts as not relevant. Lay queries (split "lay") are labelled like the train/dev queries but phrased from their
own word lists and sentence shapes (LAY_*), which no train/dev query uses: a shift to score a model under, never to
train or choose on.
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass

import polars as pl

from ticketsim.config import SyntheticConfig
from ticketsim.data.tables import LABELS, LAY, PAIR_SCHEMA, QUERY_SCHEMA, TICKET_SCHEMA, Corpus, conform, stable_split

# --------------------------------------------------------------------------------------------------------------------
# Taxonomy. Strings with "|" are alternatives; "role=a|b; role=c" lists spare parts by the role steps refer to.
# --------------------------------------------------------------------------------------------------------------------

# key: (technical names, lay names, plant tag prefix, error-code style, fault types, spare parts)
COMPONENTS: dict[str, tuple[str, str, str, str, str, str]] = {
    "gas_turbine": ("gas turbine|gas turbine package|combustion turbine", "turbine|gas turbine|big turbine|GT", "GT", "E",
                    "HEAT VIB TRIP DRIFT LEAK CLOG FW",
                    "bearing=journal bearing|thrust bearing pad; cooling=lube oil cooler; seal=labyrinth seal; "
                    "sensor=exhaust thermocouple; filter=inlet air filter|fuel gas filter; mech=compressor blade row; "
                    "electronics=turbine control card"),
    "steam_turbine": ("steam turbine|back-pressure turbine|ST unit", "steam turbine|turbine|steam turbin", "ST", "E",
                      "HEAT VIB TRIP LEAK DRIFT PDROP",
                      "bearing=journal bearing; cooling=oil cooler; seal=gland seal|carbon ring seal; "
                      "sensor=speed pickup|steam temperature sensor; mech=governor valve; filter=steam strainer"),
    "generator": ("synchronous generator|generator|alternator", "generator|genset|gen", "G", "A",
                  "HEAT VIB EARTH TRIP DRIFT",
                  "bearing=sleeve bearing; cooling=air cooler|stator cooling fan; sensor=stator winding RTD; "
                  "cable=excitation cable; electronics=AVR card; protection=generator protection relay"),
    "gearbox": ("gearbox|reduction gear|gear unit", "gearbox|gears|transmission", "GB", "E",
                "HEAT LEAK VIB CLOG",
                "bearing=pinion bearing|roller bearing; cooling=oil cooler; seal=radial shaft seal; mech=gear set|pinion; "
                "filter=oil filter; sensor=oil temperature sensor"),
    "motor": ("induction motor|asynchronous motor|drive motor", "motor|electric motor|engine", "M", "A",
              "HEAT VIB TRIP EARTH DRIFT",
              "bearing=DE bearing|NDE bearing; cooling=fan cowl|motor cooling fan; seal=terminal box gasket; "
              "mech=rotor|fan impeller; cable=motor cable; sensor=winding PTC; protection=motor protection relay"),
    "vfd": ("frequency converter|variable speed drive|converter cabinet", "VFD|drive|speed controller|freq drive", "FC", "F",
            "HEAT TRIP COMM FW EARTH PSU",
            "cooling=heat sink fan|cabinet fan; electronics=IGBT module|control unit CU320; cable=Profinet cable|encoder cable; "
            "power=DC link capacitor|24 VDC supply; protection=line fuse; sensor=current transducer; filter=cabinet filter mat"),
    "fan": ("cooling tower fan|axial fan|fan assembly", "fan|big fan|blower|cooling fan", "CT", "A",
            "VIB TRIP HEAT EARTH CLOG",
            "bearing=fan bearing; mech=fan blade|drive belt; cooling=motor cooling fins; cable=motor cable; "
            "filter=inlet screen; protection=overload relay"),
    "pump": ("centrifugal pump|process pump|feed pump", "pump|water pump|circ pump", "P", "E",
             "HEAT LEAK VIB PDROP CLOG TRIP DRIFT",
             "seal=mechanical seal|casing gasket; bearing=pump bearing; mech=impeller|wear ring|coupling; "
             "filter=suction strainer; sensor=pressure switch; cooling=seal cooler"),
    "control_valve": ("control valve|globe valve|valve positioner", "valve|control valve|regulating valve", "FV", "ALM",
                      "LEAK DRIFT CLOG COMM PDROP",
                      "seal=stem packing|seat ring; mech=valve plug|actuator diaphragm; sensor=position feedback sensor; "
                      "electronics=smart positioner|positioner board; filter=instrument air filter; cable=HART cable"),
    "flow_meter": ("flow transmitter|magnetic flowmeter|Coriolis meter", "flow meter|flow sensor|water meter", "FT", "ALM",
                   "DRIFT COMM CLOG PSU LEAK",
                   "sensor=measuring tube|electrode pair; seal=process gasket; electronics=transmitter electronics; "
                   "cable=signal cable; filter=upstream strainer; power=loop power supply"),
    "compressor": ("screw compressor|compressor package|compressor stage", "compressor|air compressor|comp", "K", "E",
                   "HEAT LEAK VIB PDROP TRIP CLOG FW",
                   "seal=shaft seal|oil separator gasket; bearing=rotor bearing; cooling=oil cooler|aftercooler; "
                   "filter=air intake filter|oil separator element; mech=inlet valve|screw element; "
                   "sensor=discharge temperature sensor; electronics=compressor controller"),
    "hydraulic": ("hydraulic power unit|HPU|hydraulic aggregate", "hydraulics|hydraulic unit|oil unit", "HY", "E",
                  "HEAT LEAK PDROP CLOG VIB TRIP",
                  "seal=cylinder seal kit|hose fitting; cooling=oil cooler; filter=return line filter|pressure filter; "
                  "mech=axial piston pump|pressure relief valve; sensor=pressure switch"),
    "transformer": ("power transformer|distribution transformer|oil-immersed transformer", "transformer|trafo|xformer",
                    "TR", "A", "HEAT LEAK EARTH DRIFT TRIP",
                    "seal=bushing gasket|tank gasket; cooling=radiator fan|oil cooler; "
                    "sensor=Buchholz relay|winding temperature indicator; mech=tap changer; protection=differential relay; "
                    "cable=LV busbar"),
    "switchgear": ("MV switchgear|circuit breaker panel|switchgear bay", "breaker|switchboard|breaker panel|electrical cabinet",
                   "SG", "A", "HEAT TRIP EARTH COMM",
                   "mech=breaker mechanism|spring charging motor; cooling=panel fan; protection=protection relay|trip coil; "
                   "cable=control wiring; sensor=current transformer; electronics=bay controller"),
    "ups": ("UPS system|uninterruptible power supply|battery inverter", "UPS|backup power|battery backup", "UPS", "ALM",
            "HEAT PSU TRIP FW COMM",
            "power=battery string|rectifier module; cooling=UPS cooling fan; electronics=inverter board|control board; "
            "cable=SNMP card cable; protection=input fuse"),
    "plc": ("PLC|programmable logic controller|PLC CPU", "PLC|controller|control box", "PLC", "HEX",
            "COMM FW PSU HEAT TRIP",
            "electronics=CPU module|backplane; power=24 VDC power supply|backup battery; cable=Profinet cable|MPI cable; "
            "cooling=cabinet fan; filter=cabinet filter mat"),
    "remote_io": ("remote I/O station|distributed I/O module|ET200 rack", "IO rack|remote IO|io card|input card", "RIO", "HEX",
                  "COMM PSU FW EARTH DRIFT",
                  "electronics=interface module IM151|analog input card; power=power module|24 VDC supply; "
                  "cable=Profibus cable|bus connector; sensor=input channel; cooling=cabinet fan"),
    "gateway": ("fieldbus gateway|Profinet coupler|protocol converter", "gateway|network box|bus coupler", "GW", "HEX",
                "COMM FW PSU HEAT",
                "electronics=gateway module|protocol card; power=24 VDC supply; cable=Ethernet patch cable|RS485 cable; "
                "cooling=cabinet fan"),
    "hmi": ("operator panel|HMI terminal|touch panel", "HMI|screen|touchscreen|display", "OP", "ALM",
            "COMM FW PSU HEAT",
            "electronics=touch panel mainboard|memory card; power=panel power supply; cable=Ethernet cable; cooling=panel fan"),
    "scada": ("SCADA server|process control system server|historian server", "SCADA|control room PC|monitoring software",
              "SRV", "ALM", "COMM FW PSU HEAT",
              "electronics=server mainboard|RAID controller|hard disk; power=redundant power supply unit; "
              "cable=network switch port|fibre optic link; cooling=server fan; filter=rack filter mat"),
    "pressure_tx": ("pressure transmitter|pressure transducer|DP transmitter", "pressure sensor|pressure gauge|sensor", "PT",
                    "ALM", "DRIFT COMM PSU LEAK CLOG",
                    "sensor=measuring cell|diaphragm seal; seal=process connection gasket; cable=4-20 mA loop cable; "
                    "electronics=transmitter electronics; filter=impulse line; power=loop power supply"),
    "temp_sensor": ("RTD sensor|Pt100 probe|thermocouple", "temp sensor|thermometer|temp probe", "TT", "ALM",
                    "DRIFT COMM EARTH PSU",
                    "sensor=Pt100 element|thermocouple insert; seal=thermowell gasket; cable=compensating cable|extension cable; "
                    "electronics=head transmitter; power=loop power supply"),
    "level_sensor": ("radar level transmitter|level transmitter|ultrasonic level sensor", "level sensor|tank gauge|level meter",
                     "LT", "ALM", "DRIFT COMM CLOG PSU",
                     "sensor=radar antenna|float; seal=flange gasket; cable=signal cable; "
                     "electronics=level transmitter electronics; power=loop power supply; filter=stilling well"),
    "ahu": ("air handling unit|AHU|ventilation unit", "AC|air conditioning|aircon|ventilation", "AHU", "ALM",
            "HEAT VIB CLOG LEAK TRIP PDROP COMM",
            "cooling=cooling coil|condenser fan; filter=bag filter|pre-filter; mech=fan belt|damper actuator; "
            "bearing=fan bearing; seal=drain pan seal; sensor=supply air sensor; electronics=AHU controller"),
    "chiller": ("chiller|chilled water unit|refrigeration unit", "chiller|cooling machine|cold water unit", "CH", "ALM",
                "HEAT LEAK PDROP TRIP COMM VIB",
                "cooling=condenser fan|condenser coil; seal=refrigerant line fitting|service valve cap; "
                "mech=expansion valve|compressor contactor; filter=filter drier; sensor=suction pressure sensor; "
                "electronics=chiller controller"),
    "heat_exchanger": ("plate heat exchanger|shell-and-tube heat exchanger|heat exchanger", "heat exchanger|HX|radiator|cooler",
                       "HX", "E", "HEAT LEAK CLOG PDROP",
                       "seal=plate gasket|tube sheet gasket; filter=inlet strainer; mech=tube bundle|plate pack; "
                       "sensor=outlet temperature sensor; cooling=cooling water valve"),
}

DEFAULT_PARTS = ("cooling=cooling fan; seal=gasket; bearing=bearing; mech=coupling; cable=signal cable; sensor=sensor element; "
                 "power=24 VDC power supply; electronics=control board; filter=filter element; protection=overload relay")

# Closely related equipment (same train or system): the same fault type on a related component is REL.
CLUSTERS = (
    "gas_turbine steam_turbine generator gearbox",
    "motor vfd fan",
    "pump control_valve flow_meter",
    "compressor hydraulic",
    "transformer switchgear ups",
    "plc remote_io gateway hmi scada",
    "pressure_tx temp_sensor level_sensor flow_meter",
    "ahu chiller heat_exchanger",
)


@dataclass(frozen=True)
class Fault:
    np: str                 # technical noun phrases (tickets)
    obs: tuple[str, ...]    # technical symptom sentences
    alarm: str              # alarm text shown next to the code
    qty: str                # measured quantity names
    unit: str               # unit; "fw" = firmware version
    value: tuple[float, float, int]   # abnormal range and decimals
    nominal: str            # nominal value / limit text for descriptions
    limit: tuple[int, int]  # range of the class's setting in solution steps
    lay_np: str             # lay phrases for query subjects
    lay: tuple[str, ...]    # lay sentences ({c} = lay component name)
    lay_meas: str           # lay mentions of the measurement ({v})
    steps: tuple[str, ...]  # solution step templates, in procedure order


FAULTS: dict[str, Fault] = {
    "HEAT": Fault(
        "overtemperature|high temperature alarm|thermal overload|excessive operating temperature",
        ("The {qty} kept rising although the load was constant.", "Thermal image showed a hot spot near the {cooling}.",
         "Temperature alarm recurred about {n} min after each restart."),
        "OVERTEMP", "bearing temperature|winding temperature|housing temperature|heat sink temperature", "°C",
        (84, 128, 1), "75", (80, 105),
        "getting hot|running hot|too hot|overheating|temp too high|very warm",
        ("the {c} is getting really hot", "{c} runs way too hot after an hour", "{c} gets so warm you cant touch it",
         "our {c} keeps overheating", "temp on the {c} goes way up"),
        "temp shows {v} degrees|thermometer says about {v}|its like {v} deg",
        ("[Cleaned|Blew out] the {cooling} and removed dust deposits from the cooling fins.",
         "[Replaced|Exchanged|Renewed] the worn {cooling} with spare part {pn}.",
         "[Checked|Verified] the cooling water supply and [adjusted|reset] the flow to {setv} l/min.",
         "[Set|Changed] the overtemperature limit in parameter {param} to {limit} °C as specified by the OEM.",
         "[Verified|Calibrated] the {sensor} against a reference thermometer; deviation within tolerance.",
         "[Replaced|Renewed] the thermal paste and retightened the heat sink screws to {torque} Nm.",
         "[Restarted|Recommissioned] the {comp} and monitored it for {hours} h under full load; "
         "temperature stayed below {limit} °C.")),
    "LEAK": Fault(
        "leakage|oil leakage|seal leakage|fluid loss",
        ("Oil film and droplets were found below the {seal}.", "Level in the reservoir dropped by {n} % within one shift.",
         "Leakage detector in the drip tray was activated."),
        "LEAKAGE DETECTED", "leakage rate|fluid loss", "l/h", (0.5, 14.0, 1), "0", (4, 16),
        "leaking|dripping|losing oil|puddle under it|leak",
        ("there is a puddle under the {c}", "the {c} is dripping oil", "{c} is leaking everywhere",
         "we keep losing fluid at the {c}", "something is dripping out of the {c}"),
        "lost about {v} liters|drips maybe {v} litres an hour|around {v} l gone",
        ("[Replaced|Exchanged|Renewed] the {seal} (P/N {pn}) and cleaned the sealing surfaces.",
         "[Retightened|Torqued] the flange bolts crosswise to {torque} Nm.",
         "[Replaced|Exchanged] the cracked drain line fitting with part {pn2}.",
         "[Pressure-tested|Leak-tested] the {comp} at {limit} bar for 30 min without pressure loss.",
         "[Topped up|Refilled] the system with {lube} and recorded the quantity in the log.",
         "[Checked|Inspected] the shaft sleeve for scoring; no damage found.",
         "Added the {comp} to the weekly leak inspection round.")),
    "VIB": Fault(
        "excessive vibration|high vibration|vibration alarm|bearing vibration",
        ("Vibration spectrum showed a peak at {n}x running speed.", "Structure-borne noise increased at the {bearing}.",
         "Vibration trend rose steadily over the last {n} days."),
        "VIB HIGH", "vibration velocity|bearing vibration", "mm/s RMS", (7.1, 28.0, 1), "4.5", (7, 11),
        "shaking|rattling|loud noise|vibrating|wobbles|grinding noise",
        ("the {c} is shaking a lot", "{c} makes a loud rattling noise", "{c} vibrates like crazy",
         "weird grinding noise from the {c}", "the whole floor shakes when the {c} runs"),
        "vib reading around {v}|handheld meter shows {v}|about {v} on the vib meter",
        ("[Replaced|Exchanged|Renewed] the {bearing} (P/N {pn}) and regreased with {lube}.",
         "[Realigned|Laser-aligned] the coupling; residual offset below 0.05 mm.",
         "[Balanced|Rebalanced] the {mech} on site to balance grade G2.5.",
         "[Retightened|Torqued] the foundation bolts to {torque} Nm.",
         "[Replaced|Exchanged] the worn {mech} with spare part {pn2}.",
         "[Set|Changed] the vibration alarm limit (parameter {param}) to {limit} mm/s.",
         "[Verified|Confirmed] vibration below {limit} mm/s after {hours} h of operation.")),
    "COMM": Fault(
        "communication loss|communication failure|bus fault|loss of fieldbus connection",
        ("Station {comp} {tag} was reported as failed in the diagnostic buffer.",
         "Link LED on the {cable} port was off.", "Telegram errors increased to {n} per minute before the dropout."),
        "BUS FAULT", "watchdog timeout|telegram timeout", "ms", (120, 5000, 0), "100", (200, 1000),
        "comm down|offline|no connection|wont talk to PLC|lost link|not talking",
        ("the {c} wont talk to the PLC anymore", "{c} keeps going offline", "no connection to the {c}",
         "comm with the {c} drops all the time", "{c} shows up grey in the system"),
        "drops out every {v} sec|times out after {v}|goes away for {v} sec",
        ("[Replaced|Exchanged] the damaged {cable} (P/N {pn}) and checked the shield grounding.",
         "[Corrected|Reassigned] the station address in parameter {param} to {addr}.",
         "[Reseated|Replugged] the bus connector and activated the terminating resistor at the last node.",
         "[Set|Increased] the watchdog timeout to {limit} ms.",
         "[Replaced|Exchanged] the faulty communication module {pn2}.",
         "[Reloaded|Downloaded] the hardware configuration and restarted the {comp}.",
         "Verified stable data exchange for {hours} h in the diagnostic buffer.")),
    "DRIFT": Fault(
        "sensor drift|measured value deviation|signal drift|implausible measurement",
        ("Measured value deviated from the redundant channel.", "Signal showed a slow offset drift over {n} days.",
         "Plausibility check flagged the {sensor} signal."),
        "SIGNAL DEVIATION", "measurement deviation|signal offset", "%", (2.0, 15.0, 1), "0.5", (2, 10),
        "wrong readings|values off|reading wrong|numbers jump|shows nonsense",
        ("the {c} shows wrong values", "readings from the {c} are way off", "the {c} values keep jumping around",
         "{c} says something different than the local gauge", "the {c} numbers make no sense"),
        "off by about {v} percent|around {v}% wrong|like {v} percent too high",
        ("[Recalibrated|Calibrated] the {sensor} with a reference calibrator at 0 %, 50 % and 100 % of range.",
         "[Replaced|Exchanged] the drifting {sensor} (P/N {pn}).",
         "[Corrected|Adjusted] the zero offset in parameter {param}.",
         "[Cleaned|Flushed] the sensing element and removed deposits.",
         "[Checked|Inspected] the {cable} for moisture ingress and replaced the cable gland.",
         "[Set|Changed] the signal damping to {limit} s.",
         "Compared readings with the redundant channel for {hours} h; deviation below 0.5 %.")),
    "TRIP": Fault(
        "trip|unexpected shutdown|overcurrent trip|protective shutdown",
        ("Protection tripped the {comp} {n} times during the shift.", "Fault history shows overcurrent on phase L{ph}.",
         "The {protection} operated without any manual intervention."),
        "OVERCURRENT TRIP", "phase current|motor current", "A", (40, 480, 0), "rated current", (60, 400),
        "keeps cutting out|shuts off|stops by itself|keeps tripping|switches off",
        ("the {c} keeps cutting out", "{c} just stops by itself", "{c} switches off randomly",
         "{c} shuts down after a few minutes", "the {c} dies every now and then"),
        "current goes up to {v} amps|amps jump to {v}|clamp meter shows {v}",
        ("[Read out|Analysed] the fault history and found overcurrent on phase L{ph}.",
         "[Replaced|Exchanged] the defective {protection} (P/N {pn}).",
         "[Set|Adjusted] the overload trip setting in parameter {param} to {limit} A.",
         "[Retightened|Torqued] the power terminals to {torque} Nm.",
         "[Extended|Increased] the ramp-up time to {ramp} s to limit the starting current.",
         "[Replaced|Exchanged] the worn {mech} that caused the overload.",
         "[Reset|Acknowledged] the trip and restarted the {comp}; it ran {hours} h without recurrence.")),
    "FW": Fault(
        "firmware fault|firmware error|checksum error|software fault",
        ("After the firmware update the {comp} did not complete its boot sequence.",
         "Diagnostics reported a checksum error in the flash memory.", "Watchdog reset occurred {n} times per day."),
        "CHECKSUM ERROR", "firmware version", "fw", (0, 0, 0), "", (1, 9),
        "stuck after update|frozen|crashed|boot loop|software error",
        ("after the update the {c} is stuck", "{c} software crashed", "the {c} keeps rebooting", "{c} screen is frozen",
         "the {c} hangs after the update"),
        "version says {v}|it is on {v}|shows {v}",
        ("[Updated|Upgraded|Flashed] the firmware to {fw} using the service tool.",
         "[Restored|Reloaded] the parameter backup after the update.",
         "[Replaced|Exchanged] the {electronics} (P/N {pn}) because the flash memory was corrupt.",
         "[Cleared|Formatted] the memory card and reinstalled the project.",
         "[Disabled|Deactivated] the automatic update function in parameter {param}.",
         "Applied hotfix {hotfix} from the vendor knowledge base.",
         "[Restarted|Rebooted] the {comp} twice and verified version {fw} on the diagnostics page.")),
    "PDROP": Fault(
        "pressure drop|low discharge pressure|pressure loss|insufficient pressure",
        ("Discharge pressure fell below the setpoint during {phase}.", "Pressure oscillated and the flow decreased by {n} %.",
         "Standby unit started because of low header pressure."),
        "PRESSURE LOW", "discharge pressure|system pressure|header pressure", "bar", (0.8, 3.6, 1), "6.0", (5, 9),
        "low pressure|no pressure|weak flow|losing pressure|pressure gone",
        ("the {c} has barely any pressure", "pressure on the {c} keeps dropping", "{c} flow is really weak",
         "the {c} loses pressure", "hardly anything comes out of the {c}"),
        "gauge shows only {v} bar|{v} bar at most|reads {v}",
        ("[Cleaned|Replaced] the {filter} (P/N {pn}).",
         "[Adjusted|Reset] the pressure setpoint in parameter {param} to {limit} bar.",
         "[Replaced|Exchanged] the worn {mech} (P/N {pn2}) to restore the delivery head.",
         "[Vented|Bled] the system and removed trapped air.",
         "[Checked|Inspected] the pressure relief valve and [readjusted|reset] it.",
         "[Repaired|Sealed] the leaking joint on the discharge line.",
         "Verified the pressure stable at {limit} bar for {hours} h.")),
    "PSU": Fault(
        "power supply fault|undervoltage|supply voltage dip|loss of auxiliary power",
        ("Supply voltage at the terminals dropped during {phase}.", "Status LED of the {power} was flashing red.",
         "Undervoltage events were logged {n} times in one day."),
        "UNDERVOLTAGE", "supply voltage|auxiliary voltage", "VDC", (15.5, 21.8, 1), "24", (60, 80),
        "no power|dead|flickering|power problem|keeps losing power",
        ("the {c} is completely dead", "{c} lights keep flickering", "the {c} has no power", "{c} loses power now and then",
         "nothing lights up on the {c}"),
        "meter shows {v} volts|only {v}V|about {v} volt",
        ("[Replaced|Exchanged] the defective {power} (P/N {pn}).",
         "[Measured|Checked] the supply voltage at terminal X1 and restored 24 VDC.",
         "[Replaced|Exchanged] the blown fuse F{fuse} on the supply rail.",
         "[Retightened|Tightened] the loose terminal on the 24 VDC rail.",
         "[Replaced|Renewed] the backup battery {pn2}.",
         "[Split|Distributed] the load onto a second supply so it stays below {limit} % load.",
         "Verified ripple below 100 mV with an oscilloscope.")),
    "CLOG": Fault(
        "clogging|blocked filter|high differential pressure|fouling",
        ("Differential pressure across the {filter} exceeded the alarm limit.", "Throughput decreased by {n} % within one week.",
         "Inspection showed heavy deposits at the inlet."),
        "DP HIGH", "differential pressure", "mbar", (250, 950, 0), "150", (200, 400),
        "clogged|blocked|dirty filter|plugged|gunked up",
        ("i think the {c} is clogged", "{c} seems blocked up", "filter on the {c} is full of dirt", "{c} is plugged again",
         "the {c} is all gunked up"),
        "reads {v} mbar|dp about {v}|shows {v}",
        ("[Replaced|Exchanged] the clogged {filter} (P/N {pn}).",
         "[Flushed|Cleaned] the {comp} with {cleaner}.",
         "[Removed|Cleared] deposits from the strainer basket and the inlet screen.",
         "[Set|Adjusted] the differential pressure alarm in parameter {param} to {limit} mbar.",
         "[Shortened|Changed] the filter change interval to {interval} operating hours.",
         "[Inspected|Checked] the drain and cleared the blocked condensate line.",
         "Verified differential pressure back below {limit} mbar.")),
    "EARTH": Fault(
        "earth fault|ground fault|insulation fault|low insulation resistance",
        ("Earth fault relay responded during {phase}.", "Insulation monitor reported a fault on the {cable}.",
         "Moisture was found in the terminal box."),
        "EARTH FAULT", "insulation resistance", "MΩ", (0.05, 0.9, 2), "100", (30, 300),
        "ground fault|breaker trips|got a shock|earth leak|insulation issue",
        ("the main breaker trips when we start the {c}", "someone got a shock touching the {c}",
         "{c} throws a ground fault", "RCD keeps going off with the {c}", "the {c} trips the breaker when its wet"),
        "megger shows {v}|insulation tester says {v}|only {v} meg",
        ("[Measured|Tested] the insulation resistance with a 1000 V megger and located the fault.",
         "[Dried|Heated out] the winding with a heating fan for {hours} h.",
         "[Replaced|Exchanged] the damaged {cable} (P/N {pn}) with chafed insulation.",
         "[Sealed|Replaced] the terminal box gasket to stop moisture ingress.",
         "[Replaced|Exchanged] the faulty earth fault relay {pn2}.",
         "[Set|Adjusted] the earth fault protection in parameter {param} to {limit} mA.",
         "[Verified|Confirmed] insulation above 100 MΩ before re-energizing the {comp}.")),
}

# Ticket description and subject templates (technical register).
SUBJECTS = ("{Comp} {tag}: {np}", "{Comp} {tag} - {np} ({code})", "{Np} on {comp} {tag}", "{code} {np} at {comp} {tag}",
            "{site}: {comp} {tag} {np}", "{Np} {comp} {tag}, alarm {code}")
OPENINGS = ("{Comp} {tag} reported {np} during {phase}.", "Operator reported {np} on {comp} {tag} during {phase}.",
            "{Np} detected on {comp} {tag} at {site} during {phase}.", "Shift team noticed {np} at {comp} {tag} ({site}).")
CODE_SENTENCES = ("Alarm {code} was raised in the {system} event log.", "Error code {code} was active on the local display.",
                  "Fault {code} ({alarm}) logged at {clock}.", "The controller logged {code} followed by {code2}.")
MEAS_SENTENCES = ("Measured {qty} was {v} {unit} (nominal {nominal} {unit}).", "Trend shows {qty} at {v} {unit}.",
                  "{Qty} reached {v} {unit} before the alarm.")
FW_SENTENCES = ("Installed firmware is {v}.", "Device was running firmware {v} at the time of the fault.")
EXTRA_SENTENCES = (
    "The unit has {h} operating hours since the last overhaul.", "The fault occurred {n} times within the last {m} days.",
    "The problem started after {event}.", "Reset from the {system} did not clear the fault.",
    "Visual inspection of the {part} showed no obvious damage.", "Wiring and terminals were checked without findings.",
    "{Line} was stopped for {n} h.", "Standby unit took over; no production loss.", "Unit was switched to manual mode.",
    # shared vocabulary: words that lay queries use for other faults
    "The unit runs in hot standby with a redundant {comp}.", "A power cycle was performed by the shift team.",
    "Signal noise filter had been enabled earlier this year.", "Last offline parameter backup dates from {date}.",
    "The enclosure door was found open and wet.", "Operators mentioned a noise complaint from the neighbouring hall.",
)
PHASES = ("start-up", "normal operation", "a load change", "the night shift", "commissioning", "the shutdown sequence",
          "partial load", "a grid disturbance")
SYSTEMS = ("DCS", "SCADA", "HMI", "PLC", "condition monitoring system", "CMMS")
EVENTS = ("a power failure", "the annual maintenance", "a firmware update", "a filter change", "a plant shutdown",
          "a thunderstorm", "the replacement of the {part}", "a cleaning campaign")
SITES = ("Line 1", "Line 2", "Line 3", "Unit 2", "Building B", "Compressor house", "Pump station 4", "Boiler house",
         "Hall 7", "Substation 2")
LUBES = ("ISO VG 46 hydraulic oil", "ISO VG 32 turbine oil", "ISO VG 220 gear oil", "lithium complex grease NLGI 2",
         "polyurea grease", "synthetic compressor oil")
CLEANERS = ("citric acid solution", "alkaline cleaner", "demineralised water", "compressed air", "CIP solution")
PN_PREFIXES = ("SK", "BRG", "KIT", "PCB", "MOD", "CBL", "FLT", "6ES7", "3RU", "VS", "SP")

# Query templates (lay register).
PLACES = ("in hall 2", "on line 3", "in the basement", "at the north site", "in building B", "next to the boiler room",
          "on the roof", "in the workshop", "out back", "at plant 2")
TIMES = ("since this morning", "since yesterday", "for two days now", "since the weekend", "since the shutdown",
         "every few hours", "again", "all of a sudden")
VAGUE_SUBJECTS = ("{c} problem", "issue with {c}", "{c} not working right", "help with {c}", "{c} acting up")
CODE_MENTIONS = ("display shows {code}", "error {code} on the screen", "it throws {code}", "alarm says {code}")
CLOSINGS = ("What should we check?", "Any idea what to do?", "Please help, production is waiting.",
            "We already restarted it twice.", "Who can fix this?", "Need someone asap.")
FILLER = frozenset(re.findall(r"\w+", " ".join(PLACES + TIMES + VAGUE_SUBJECTS + CODE_MENTIONS + CLOSINGS).lower()))
STOPWORDS = frozenset("a an the and or of to in on at for with is are was were it its by from as be this that our we "
                      "i you he she they has have had not no".split())

# The lay split (split "lay"): queries as people outside maintenance write them, in words and sentence shapes that no
# train/dev query template above uses (tests/test_synthetic.py checks it), so a model chosen on train/dev queries meets
# them as a later user would. Written once and never tuned against: changing them to suit a model defeats the split.
LAY_THINGS = {   # component -> what someone who does not know its name calls it
    "gas_turbine": ("the jet spinner", "the giant whirling thing that burns fuel"),
    "steam_turbine": ("the spinner driven by vapour", "the whirling wheel the vapour pushes"),
    "generator": ("the thing producing our electricity", "the dynamo"),
    "gearbox": ("the housing packed with cogs", "the cog case between the shafts"),
    "motor": ("the humming round thing that turns the shaft", "the thing that spins the shaft"),
    "vfd": ("the gadget that decides how fast the shaft spins", "the slate-coloured cupboard that sets the rpm"),
    "fan": ("the giant propeller", "the propeller thing"),
    "pump": ("the thing that pushes the liquid through the pipes", "the pusher in the pipework"),
    "control_valve": ("the automatic tap on the pipe", "the tap that opens and closes on its own"),
    "flow_meter": ("the counter on the pipe", "the gadget counting what passes through the pipe"),
    "compressor": ("the squeezer in the shed", "the thing that fills the receivers"),
    "hydraulic": ("the cylinders and hoses", "the thing with the pushing cylinders"),
    "transformer": ("the humming metal block by the fence", "the metal block with the warning sign"),
    "switchgear": ("the wall of levers", "the lever wall in the corridor"),
    "ups": ("the emergency supply", "the thing that takes over when the mains fails"),
    "plc": ("the automation brain", "the logic brain in the cupboard"),
    "remote_io": ("the row of plug-in modules", "the module strip with the blinking LEDs"),
    "gateway": ("the translator gadget between the cables", "the little gadget joining the cables"),
    "hmi": ("the operators' tablet", "the tablet on the wall the operators tap"),
    "scada": ("the overview computers", "the computers in the office that watch everything"),
    "pressure_tx": ("the little dial on the pipe", "the dial that tells how hard the pipe pushes"),
    "temp_sensor": ("the thermo stick", "the little stick that tells the warmth"),
    "level_sensor": ("the gadget on the vat lid", "the thing that tells how deep the vat is"),
    "ahu": ("the ductwork", "the thing that blows fresh breeze into the offices"),
    "chiller": ("the giant fridge", "the chilling fridge for the offices"),
    "heat_exchanger": ("the plate stack that swaps warmth", "the swap plates"),
}
LAY_TROUBLES = {   # fault type -> what it does, said by someone who does not know the fault's name
    "HEAT": ("is baking", "could fry an egg", "smells as if it is cooking", "is roasting"),
    "LEAK": ("is weeping liquid", "has a dribble underneath", "leaves a slick behind"),
    "VIB": ("kicks up a racket", "is banging and clattering", "hums and judders"),
    "COMM": ("stopped answering the computers", "dropped off the radar", "went silent"),
    "DRIFT": ("tells fibs", "gives figures nobody believes", "is telling porkies"),
    "TRIP": ("conks out", "gives up halfway", "quits on its own"),
    "FW": ("went haywire after the patch", "forgot everything after the patch", "is confused since the patch"),
    "PDROP": ("scarcely pushes", "turned feeble", "only gives a trickle"),
    "PSU": ("went dark", "has no juice", "blinks on and off"),
    "CLOG": ("is choked with muck", "is bunged up", "is furred up"),
    "EARTH": ("zaps people", "gave a tingle to whoever grabbed it", "flips the mains lever"),
}
LAY_SUBJECTS = ("about {thing}", "{thing} trouble", "question regarding {thing}", "{thing}")
LAY_SHAPES = ("{thing} {trouble}.", "Hello, {thing} {trouble} today.", "My colleague reckons {thing} {trouble}.",
              "{thing} {trouble} and nobody here knows why.", "Quick one: {thing} {trouble}, is that normal?",
              "Since Monday {thing} {trouble}.", "Not sure whom to ask, but {thing} {trouble}.")


@dataclass(frozen=True)
class FaultClass:
    index: int
    component: str
    fault: str
    codes: tuple[str, str]
    value: float
    values: dict[str, str]      # class-level fill-ins: part numbers, parameters, chosen parts, settings
    steps: tuple[str, ...]      # the canonical procedure: ordered subset of the fault's step templates


def generate(cfg: SyntheticConfig, seed: int) -> Corpus:
    """A ticket corpus of `cfg` sizes, identical for identical (cfg, seed)."""
    rng = random.Random(seed)
    classes = _fault_classes(rng)
    related = _related()
    active = _active_classes(classes, cfg.n_tickets, rng)
    ticket_class = _spread(active, cfg.n_tickets, rng)
    tickets = [_ticket(f"T{i + 1:05d}", classes[c], rng) for i, c in enumerate(ticket_class)]
    vocabulary = {token for row in tickets for field in ("subject", "description", "solution") for token in _tokens(row[field])}
    postings: dict[str, list[int]] = {}
    for t, row in enumerate(tickets):
        for word in sorted(set(_tokens(" ".join((row["subject"], row["description"], row["solution"])))) - STOPWORDS):
            postings.setdefault(word, []).append(t)
    by_class: dict[int, list[int]] = {}
    for t, c in enumerate(ticket_class):
        by_class.setdefault(c, []).append(t)
    queries, pairs = [], []

    def labelled(query: dict[str, str], fc: FaultClass, split: str, rng: random.Random) -> None:
        queries.append(query)
        chosen = _labelled_candidates(fc, query, classes, by_class, postings, related, cfg.pairs_per_query, rng)
        pairs.extend({"query_id": query["query_id"], "ticket_id": tickets[t]["ticket_id"], "label": label, "split": split}
                     for t, label in chosen)

    for number in range(cfg.n_labeled_queries):
        query_id = f"Q{number + 1:04d}"
        fc = classes[rng.choice(active)]
        labelled(_query(query_id, fc, vocabulary, rng), fc, stable_split(query_id, cfg.split), rng)
    enduser_classes = rng.sample(active, min(cfg.n_enduser_queries, len(active)))
    enduser_classes += [rng.choice(active) for _ in range(cfg.n_enduser_queries - len(enduser_classes))]
    for number, c in enumerate(enduser_classes):
        query_id = f"U{number + 1:03d}"
        fc = classes[c]
        queries.append(_query(query_id, fc, vocabulary, rng))
        gold = {t: LABELS["YES"] if classes[tc].fault == fc.fault else LABELS["REL"]
                for tc, members in by_class.items() if classes[tc].component == fc.component for t in members}
        pairs += [{"query_id": query_id, "ticket_id": tickets[t]["ticket_id"], "label": gold[t], "split": "test"}
                  for t in sorted(gold)]
    lay_rng = random.Random(f"lay-{seed}")    # its own stream: adding lay queries leaves every other record as it was
    for number in range(cfg.n_lay_queries):
        fc = classes[lay_rng.choice(active)]
        labelled(_lay_query(f"L{number + 1:03d}", fc, lay_rng), fc, LAY, lay_rng)
    return Corpus(
        conform(pl.DataFrame(tickets, schema={k: pl.String for k in TICKET_SCHEMA}), TICKET_SCHEMA),
        conform(pl.DataFrame(queries, schema={k: pl.String for k in QUERY_SCHEMA}), QUERY_SCHEMA),
        conform(pl.DataFrame(pairs, schema={"query_id": pl.String, "ticket_id": pl.String, "label": pl.Int8,
                                            "split": pl.String}), PAIR_SCHEMA),
    )


# --------------------------------------------------------------------------------------------------------------------
# Taxonomy -> fault classes
# --------------------------------------------------------------------------------------------------------------------

def _alternatives(text: str) -> list[str]:
    return [part.strip() for part in text.split("|")]


def _parts(text: str) -> dict[str, list[str]]:
    return {role.strip(): _alternatives(names) for role, names in (item.split("=") for item in text.split(";"))}


def _related() -> dict[str, set[str]]:
    related: dict[str, set[str]] = {key: set() for key in COMPONENTS}
    for cluster in CLUSTERS:
        members = cluster.split()
        for member in members:
            related[member].update(m for m in members if m != member)
    return related


def _fault_classes(rng: random.Random) -> list[FaultClass]:
    """Every (component, fault type) the taxonomy allows, with class-specific codes, parts and procedure."""
    classes, used_codes = [], set()
    for component, (_, _, _, code_style, faults, parts_text) in COMPONENTS.items():
        parts = {**_parts(DEFAULT_PARTS), **_parts(parts_text)}
        for fault_key in faults.split():
            fault = FAULTS[fault_key]
            codes = []
            while len(codes) < 2:
                code = _code(code_style, rng)
                if code not in used_codes:
                    used_codes.add(code)
                    codes.append(code)
            lo, hi, decimals = fault.value
            n_steps = rng.randint(4, min(6, len(fault.steps)))
            steps = tuple(fault.steps[i] for i in sorted(rng.sample(range(len(fault.steps)), n_steps)))
            values = {role: rng.choice(names) for role, names in parts.items()}
            values.update(
                pn=_part_number(rng), pn2=_part_number(rng), param=f"P{rng.randint(1000, 2999)}",
                limit=str(rng.randint(*fault.limit)), setv=str(rng.randint(20, 120)), torque=str(rng.choice(range(20, 185, 5))),
                hours=str(rng.choice((2, 4, 8, 12, 24, 48))), lube=rng.choice(LUBES), cleaner=rng.choice(CLEANERS),
                addr=str(rng.randint(2, 126)), hotfix=f"KB-{rng.randint(10000, 99999)}", fuse=str(rng.randint(1, 12)),
                ph=str(rng.randint(1, 3)), interval=str(rng.choice((500, 1000, 2000, 4000))), ramp=str(rng.randint(5, 30)),
                fw=f"V{rng.randint(2, 5)}.{rng.randint(0, 9)}.{rng.randint(1, 20)}",
                oldfw=f"V{rng.randint(1, 2)}.{rng.randint(0, 9)}.{rng.randint(1, 20)}",
                qty=rng.choice(_alternatives(fault.qty)),
            )
            value = round(rng.uniform(lo, hi), decimals)
            classes.append(FaultClass(len(classes), component, fault_key, (codes[0], codes[1]), value, values, steps))
    return classes


def _code(style: str, rng: random.Random) -> str:
    if style == "ALM":
        return f"ALM-{rng.randint(100, 999)}"
    if style == "HEX":
        return f"0x{rng.randint(0x1000, 0xFFFF):04X}"
    if style == "F":
        return f"F{rng.randint(10000, 39999)}"
    return f"{style}{rng.randint(1000, 9999)}"


def _part_number(rng: random.Random) -> str:
    return f"{rng.choice(PN_PREFIXES)}-{rng.randint(1000, 9999)}{rng.choice(('', '', 'A', 'B', '-01'))}"


def _active_classes(classes: list[FaultClass], n_tickets: int, rng: random.Random) -> list[int]:
    """The classes tickets are drawn from: all of them, or a sample giving each about six tickets in small corpora."""
    n = max(1, min(len(classes), n_tickets // 6))
    return sorted(rng.sample(range(len(classes)), n))


def _spread(active: list[int], n_tickets: int, rng: random.Random) -> list[int]:
    """A shuffled class per ticket: every active class at least twice when there is room, the rest by random weights."""
    base = min(2, n_tickets // len(active))
    assignment = [c for c in active for _ in range(base)]
    weights = [rng.uniform(0.4, 1.6) for _ in active]
    assignment += rng.choices(active, weights=weights, k=n_tickets - len(assignment))
    rng.shuffle(assignment)
    return assignment


# --------------------------------------------------------------------------------------------------------------------
# Text
# --------------------------------------------------------------------------------------------------------------------

_CHOICE = re.compile(r"\[([^\]]+)\]")
_WORD = re.compile(r"\w+")


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _render(template: str, context: dict[str, str], rng: random.Random) -> str:
    text = _CHOICE.sub(lambda m: rng.choice(m.group(1).split("|")), template)
    text = text.format_map(context)
    return text[:1].upper() + text[1:]


def _measurement(fc: FaultClass, rng: random.Random, spread: float) -> str:
    fault = FAULTS[fc.fault]
    if fault.unit == "fw":
        return fc.values["oldfw"]
    decimals = fault.value[2]
    value = round(fc.value * rng.uniform(1 - spread, 1 + spread), decimals)
    return f"{value:.{decimals}f}" if decimals else str(int(value))


def _ticket(ticket_id: str, fc: FaultClass, rng: random.Random) -> dict[str, str]:
    fault = FAULTS[fc.fault]
    names = _alternatives(COMPONENTS[fc.component][0])
    comp = rng.choice(names)
    np = rng.choice(_alternatives(fault.np))
    context = dict(fc.values)
    code = 0 if rng.random() < 0.75 else 1
    context.update(
        code=fc.codes[code], code2=fc.codes[1 - code], comp=comp, Comp=comp[:1].upper() + comp[1:],
        np=np, Np=np[:1].upper() + np[1:],
        tag=f"{COMPONENTS[fc.component][2]}-{rng.randint(100, 499)}{rng.choice(('', '', 'A', 'B'))}",
        alarm=fault.alarm,
        phase=rng.choice(PHASES), system=rng.choice(SYSTEMS), site=rng.choice(SITES), Line=rng.choice(SITES),
        clock=f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}", n=str(rng.randint(2, 12)), m=str(rng.randint(3, 30)),
        h=str(rng.randint(800, 42000)), date=f"20{rng.randint(15, 19)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
        part=rng.choice([fc.values[r] for r in ("seal", "bearing", "cooling", "electronics", "cable", "filter", "sensor")]),
        v=_measurement(fc, rng, 0.07), unit=fault.unit, nominal=fault.nominal,
    )
    context["qty"] = fc.values["qty"] if rng.random() < 0.7 else rng.choice(_alternatives(fault.qty))
    context["Qty"] = context["qty"][:1].upper() + context["qty"][1:]
    context["event"] = rng.choice(EVENTS).format_map(context)

    subject = _render(rng.choice(SUBJECTS), context, rng)
    n_sentences = rng.randint(3, 6)
    sentences = [rng.choice(OPENINGS)]
    if rng.random() < 0.7:
        sentences.append(rng.choice(fault.obs))
    if rng.random() < 0.85:
        sentences.append(rng.choice(CODE_SENTENCES))
    if rng.random() < 0.8:
        sentences.append(rng.choice(FW_SENTENCES if fault.unit == "fw" else MEAS_SENTENCES))
    extras = rng.sample(EXTRA_SENTENCES, max(0, n_sentences - len(sentences)))
    description = " ".join(_render(s, context, rng) for s in (sentences + extras)[:n_sentences])

    n_steps = rng.randint(2, min(5, len(fc.steps)))
    steps = [fc.steps[i] for i in sorted(rng.sample(range(len(fc.steps)), n_steps))]
    solution = " ".join(_render(s, context, rng) for s in steps)
    return {"ticket_id": ticket_id, "subject": subject, "description": description, "solution": solution}


def _misspell(word: str, vocabulary: set[str], rng: random.Random) -> str:
    """A typo of `word` (swap, drop, double or vowel slip) that no ticket contains; the word itself if none is found."""
    for _ in range(8):
        i = rng.randint(1, len(word) - 2)
        operation = rng.randrange(4)
        if operation == 0:
            typo = word[:i] + word[i + 1] + word[i] + word[i + 2:]
        elif operation == 1:
            typo = word[:i] + word[i + 1:]
        elif operation == 2:
            typo = word[:i] + word[i] + word[i:]
        else:
            vowels = "aeiou"
            if word[i] not in vowels:
                continue
            typo = word[:i] + rng.choice(vowels.replace(word[i], "")) + word[i + 1:]
        if typo != word and typo.lower() not in vocabulary:
            return typo
    return word


def _typos(text: str, vocabulary: set[str], rng: random.Random, n: int) -> str:
    """`n` misspelled words of 6+ letters, taken from the equipment and fault wording (not the small talk)."""
    words = text.split(" ")
    eligible = [i for i, w in enumerate(words) if w.isalpha() and len(w) >= 6 and w.lower() not in FILLER]
    for i in rng.sample(eligible, min(n, len(eligible))):
        words[i] = _misspell(words[i], vocabulary, rng)
    return " ".join(words)


def _query(query_id: str, fc: FaultClass, vocabulary: set[str], rng: random.Random) -> dict[str, str]:
    fault = FAULTS[fc.fault]
    lay_name = rng.choice(_alternatives(COMPONENTS[fc.component][1]))
    code = rng.choice(fc.codes)
    if rng.random() < 0.2:
        subject = rng.choice(VAGUE_SUBJECTS).format(c=lay_name)
    elif rng.random() < 0.75:
        subject = f"{lay_name} {rng.choice(_alternatives(fault.lay_np))}"
    else:
        subject = f"{rng.choice(_alternatives(fault.lay_np))} - {lay_name}"
    if rng.random() < 0.15:
        subject = f"{subject} {code}"
    first = rng.choice(fault.lay).format(c=lay_name)
    if fc.component == "plc":
        subject, first = subject.replace("PLC", "HMI"), first.replace("PLC", "HMI")
    first = f"{first} {rng.choice(TIMES)}" if rng.random() < 0.5 else f"{first} {rng.choice(PLACES)}"
    sentences = [first[:1].upper() + first[1:] + "."]
    r = rng.random()
    if r < 0.25:
        sentences.append(f"{rng.choice(CODE_MENTIONS).format(code=code)}.")
    elif r < 0.5:
        sentences.append(f"{rng.choice(_alternatives(fault.lay_meas)).format(v=_measurement(fc, rng, 0.1))}.")
    elif r < 0.8:
        sentences.append(rng.choice(CLOSINGS))
    sentences = [s[:1].upper() + s[1:] for s in sentences]
    n_typos = rng.choices((0, 1, 2), weights=(0.4, 0.45, 0.15))[0]
    text = _typos(subject + " \n " + " ".join(sentences), vocabulary, rng, n_typos)
    subject, description = text.split(" \n ", 1)
    if rng.random() < 0.5:
        subject = subject.lower()
    return {"query_id": query_id, "subject": subject, "description": description}


def _lay_query(query_id: str, fc: FaultClass, rng: random.Random) -> dict[str, str]:
    """A query of the lay split: LAY_THINGS and LAY_TROUBLES in LAY_SHAPES; no code, no measurement, no typo."""
    thing, trouble = rng.choice(LAY_THINGS[fc.component]), rng.choice(LAY_TROUBLES[fc.fault])
    description = rng.choice(LAY_SHAPES).format(thing=thing, trouble=trouble)
    return {"query_id": query_id, "subject": rng.choice(LAY_SUBJECTS).format(thing=thing),
            "description": description[:1].upper() + description[1:]}


# --------------------------------------------------------------------------------------------------------------------
# Labels
# --------------------------------------------------------------------------------------------------------------------

def _label(query: FaultClass, ticket: FaultClass, related: dict[str, set[str]]) -> int:
    if query.component == ticket.component:
        return LABELS["YES"] if query.fault == ticket.fault else LABELS["REL"]
    if query.fault == ticket.fault and ticket.component in related[query.component]:
        return LABELS["REL"]
    return LABELS["NO"]


def _labelled_candidates(fc: FaultClass, query: dict[str, str], classes: list[FaultClass], by_class: dict[int, list[int]],
                         postings: dict[str, list[int]], related: dict[str, set[str]], k: int,
                         rng: random.Random) -> list[tuple[int, int]]:
    """`k` distinct (ticket index, label): the first YES or REL, the rest drawn for a ~30/30/40 YES/REL/NO mix overall.

    NO candidates are hard negatives where possible: 40 % the same fault type on an unrelated component, 35 % among
    the 12 NO tickets sharing the most (non-stop) words with the query, 25 % any NO ticket.
    """
    yes, rel, no = LABELS["YES"], LABELS["REL"], LABELS["NO"]
    pools: dict[int, list[int]] = {label: [] for label in LABELS.values()}
    same_fault: list[int] = []
    for c, members in by_class.items():
        label = _label(fc, classes[c], related)
        pools[label] += members
        if label == no and classes[c].fault == fc.fault:
            same_fault += members
    for members in (*pools.values(), same_fault):
        members.sort()
    negatives = set(pools[no])
    shared: dict[int, int] = {}
    for word in sorted(set(_tokens(query["subject"] + " " + query["description"])) - STOPWORDS):
        for t in postings.get(word, ()):
            if t in negatives:
                shared[t] = shared.get(t, 0) + 1
    overlap = sorted(shared, key=lambda t: (-shared[t], t))[:12]
    # after a first YES-or-REL pair, the remaining k-1 pairs give YES 0.3k, REL 0.3k, NO 0.4k on average
    rest = max(k - 1, 1)
    weights = (max(0.3 * k - 0.5, 0) / rest, max(0.3 * k - 0.5, 0) / rest, 0.4 * k / rest)
    wanted = [rng.choice((yes, rel))] + rng.choices((yes, rel, no), weights=weights, k=k - 1)
    chosen: list[tuple[int, int]] = []
    taken: set[int] = set()
    for label in wanted:
        order = {yes: (yes, rel, no), rel: (rel, yes, no), no: (no, rel, yes)}[label]
        for fallback in order:
            if fallback == no:
                r = rng.random()
                preferred = same_fault if r < 0.4 else overlap if r < 0.75 else pools[no]
                candidates = [t for t in preferred if t not in taken] or [t for t in pools[no] if t not in taken]
            else:
                candidates = [t for t in pools[fallback] if t not in taken]
            if candidates:
                t = rng.choice(candidates)
                taken.add(t)
                chosen.append((t, fallback))
                break
    return chosen
